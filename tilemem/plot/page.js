// tilemem html: the page's own script. Fills the Bokeh sources of the tile-dependent views
// from the embedded data (tilemem.plot.pagedata) when a tile is selected; keeps #tile=N in
// the address. Exposes window.tilemem = {select, data, ready}.
(function () {
  'use strict';
  const DATA = JSON.parse(document.getElementById('tilemem-data').textContent);
  const T = DATA.target;
  const TM = T.tileMemory;
  const fmt = (n) => Number(n).toLocaleString('en-US');
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]));
  const $ = (id) => document.getElementById(id);
  const included = new Map(DATA.included.map((c) => [c.tile, c.why]));
  const cache = new Map();
  let doc = null;
  let current = null;

  function decode(col) {
    const raw = atob(col.b64);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    if (col.dtype === 'u1') return bytes;
    if (col.dtype === 'i4') return new Int32Array(bytes.buffer);
    return new Float64Array(bytes.buffer);
  }

  function darker(hex) {
    const v = parseInt(hex.slice(1), 16);
    const c = [(v >> 16) & 255, (v >> 8) & 255, v & 255].map((x) => Math.round(x * 0.65));
    return '#' + c.map((x) => x.toString(16).padStart(2, '0')).join('');
  }

  // one tile's columns, decoded once
  function tileCols(t) {
    if (cache.has(t)) return cache.get(t);
    const e = DATA.tiles[String(t)];
    const c = {e: e, n: e.n};
    for (const k of ['x0', 'size', 'y0', 'y1', 'var', 'align', 'cat', 'cls', 'flags']) c[k] = decode(e[k]);
    if (e.x0b) c.x0b = decode(e.x0b);
    c.names = e.n ? e.names.split('\n') : [];
    if (e.live) {
      c.liveStart = decode(e.live.start);
      c.liveBytes = decode(e.live.bytes);
    }
    cache.set(t, c);
    return c;
  }

  function model(name) {
    const m = doc.get_model_by_name(name);
    if (!m) throw new Error('tilemem: no Bokeh model named ' + name);
    return m;
  }

  function flagText(bits) {
    const out = [];
    DATA.flags.forEach((f, i) => { if (bits & (1 << i)) out.push(f); });
    return out.join(', ');
  }

  function mapData(c, x0) {
    const n = c.n;
    const lanes = c.e.kind === 'lanes';
    const d = {left: new Float64Array(n), right: new Float64Array(n), bottom: new Float64Array(n),
      top: new Float64Array(n), color: new Array(n), line: new Array(n), name: c.names,
      var: c.var, size: c.size, align: c.align, cat: new Array(n), cls: c.cls,
      flags: new Array(n), offset: new Float64Array(n)};
    const lines = DATA.categoryColours.map(darker);
    for (let i = 0; i < n; i++) {
      d.left[i] = x0[i]; d.offset[i] = x0[i]; d.right[i] = x0[i] + c.size[i];
      d.bottom[i] = c.y0[i]; d.top[i] = lanes ? c.y0[i] + 0.8 : c.y1[i];
      d.color[i] = DATA.categoryColours[c.cat[i]] || '#999999';
      d.line[i] = lines[c.cat[i]] || '#666666';
      d.cat[i] = DATA.categories[c.cat[i]] || ('category ' + c.cat[i]);
      d.flags[i] = flagText(c.flags[i]);
    }
    return d;
  }

  function emptyMap() {
    const d = {};
    for (const k of ['left', 'right', 'bottom', 'top', 'color', 'line', 'name', 'var', 'size', 'align', 'cat', 'cls', 'flags', 'offset']) d[k] = [];
    return d;
  }

  function extent(d, highest) {
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < d.bottom.length; i++) { lo = Math.min(lo, d.bottom[i]); hi = Math.max(hi, d.top[i]); }
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    if (hi <= lo) hi = lo + 1;
    const xmax = highest > TM ? highest * 1.02 : TM;
    return {lo: lo, hi: hi, xmax: xmax};
  }

  function setRanges(prefix, ex) {
    model(prefix + 'X').setv({start: 0, end: ex.xmax});
    const pad = (ex.hi - ex.lo) * 0.01;
    model(prefix + 'Y').setv({start: ex.hi + pad, end: ex.lo - pad});   // time runs downwards
  }

  // a step function [start[k], start[k+1]) -> v[k] as the corner points of a line
  function corners(start, v, swap) {
    const xs = [], ys = [];
    for (let k = 0; k < start.length; k++) {
      const a = start[k], b = k + 1 < start.length ? start[k + 1] : start[k] + 1;
      xs.push(a, b); ys.push(v[k], v[k]);
    }
    return swap ? {x: ys, y: xs} : {x: xs, y: ys};
  }

  function overviewAt(t) {
    const d = model('overview').data;
    return {incl: d.incl[t], total: d.total[t], over: d.over[t], gaps: d.gaps[t],
      ni: d.nonInterleaved[t], il: d.interleaved[t], of: d.overflowed[t]};
  }

  function figuresHtml(t) {
    const o = overviewAt(t);
    const cells = [
      ['including gaps', fmt(o.incl) + ' B of ' + fmt(TM)],
      ['excluding gaps', fmt(o.total) + ' B'],
      ['gaps', fmt(o.gaps) + ' B'],
      ['non-interleaved', fmt(o.ni) + ' B'], ['interleaved', fmt(o.il) + ' B'],
      ['overflowed', fmt(o.of) + ' B'],
    ];
    return cells.map((c) => '<div class="fig"><span>' + c[0] + '</span><b>' + c[1] + '</b></div>').join('');
  }

  function table(head, rows, cls) {
    return '<table class="' + (cls || '') + '"><thead><tr>' + head.map((h) => '<th>' + h + '</th>').join('') +
      '</tr></thead><tbody>' + rows.map((r) => '<tr>' + r.map((v) => typeof v === 'number'
        ? '<td class="num">' + fmt(v) + '</td>' : '<td>' + v + '</td>').join('') + '</tr>').join('') + '</tbody></table>';
  }

  function verdictHtml(t, e) {
    const o = overviewAt(t);
    if (o.over <= 0) {
      return '<div class="verdict fits">Fits: highest end ' + fmt(o.incl) + ' B, ' + fmt(TM - o.incl) + ' B below tileMemory.</div>';
    }
    const d = e && e.oom;
    if (!d) {
      return '<div class="verdict oom">Out of memory by ' + fmt(o.over) + ' B. No diagnosis in this file (the tile was left out for the size budget).</div>';
    }
    let h = '<div class="verdict oom code-' + d.verdictCode + '"><b>Out of memory by ' + fmt(d.excess) + ' B</b> (highest end ' + fmt(d.highestEnd) + ' B of ' + fmt(d.tileMemory) + ' B).<br>';
    h += 'Bound: maximum live bytes ' + fmt(d.maxLiveBytes) + ' B (' + (d.boundExact ? 'exact' : 'best found, at most ' + fmt(d.maxLiveUpperBytes)) + '; always-live ' + fmt(d.alwaysLiveBytes) + ' B; ' + fmt(d.peakVarCount) + ' variables live at the peak)';
    if (d.peakSteps) h += ', at program step ' + fmt(d.peakSteps[0]);
    h += '.<br><span class="verdict-text" id="verdict-text">Verdict: ' + esc(d.verdict) + '</span>';
    if (d.repack) h += '<br>Re-pack: ' + esc(d.repack.method) + ' (' + esc(d.repack.status) + '), highest end ' + fmt(d.repack.totalIncludingGaps) + ' B.';
    for (const n of d.notes || []) h += '<br><i>note: ' + esc(n) + '</i>';
    return h + '</div>';
  }

  function oomPeakHtml(e) {
    const d = e && e.oom;
    if (!d) return '';
    const rows = d.peakVars.map((v) => [esc(v.name) + (v.alwaysLive ? ' <i>(always-live)</i>' : ''), v.var, esc(v.category), v['class'], v.size]);
    return '<h3>Largest variables live at the peak (oom diagnosis)</h3>' + table(['name', 'var', 'category', 'class', 'bytes'], rows);
  }

  function legendHtml(c) {
    const bytes = new Map();
    for (let i = 0; i < c.n; i++) bytes.set(c.cat[i], (bytes.get(c.cat[i]) || 0) + c.size[i]);
    const items = [...bytes.entries()].sort((a, b) => b[1] - a[1]);
    return items.map(([k, b]) => '<span><i style="background:' + DATA.categoryColours[k] + '"></i>' + esc(DATA.categories[k]) + ' ' + fmt(b) + ' B</span>').join('');
  }

  function gapsData(g) {
    const d = {left: [], right: [], color: [], cause: [], bytes: []};
    for (let i = 0; i < g.start.length; i++) {
      d.left.push(g.start[i]); d.right.push(g.end[i]); d.color.push(DATA.gapColours[g.cause[i]]);
      d.cause.push(DATA.gapCauses[g.cause[i]]); d.bytes.push(g.end[i] - g.start[i]);
    }
    return d;
  }

  function showMap(t, c) {
    const e = c ? c.e : null;
    const md = c ? mapData(c, c.x0) : emptyMap();
    model('mapSrc').data = md;
    const ex = extent(md, overviewAt(t).incl);
    setRanges('map', ex);
    const label = {steps: 'program step', points: 'program point (order reconstructed from interference)', lanes: 'lane (variables sharing bytes)'};
    model('mapYAxis').axis_label = e ? label[e.kind] : '';
    model('gapsSrc').data = e ? gapsData(e.gaps) : {left: [], right: [], color: [], cause: [], bytes: []};
    model('gapsCover').data = {left: md.left, right: md.right};
    $('legend').innerHTML = c ? legendHtml(c) : '';
    if (e) {
      const gb = e.figures.gapBytes;
      const rows = DATA.gapCauses.map((name, k) => ['<i class="sw" style="background:' + DATA.gapColours[k] + '"></i>' + name, gb[k]]).filter((r) => r[1] > 0);
      $('gap-table').innerHTML = '<h3>Gaps by likely cause</h3>' + (rows.length ? table(['cause', 'bytes'], rows) : '<p>none</p>');
    } else {
      $('gap-table').innerHTML = '';
    }
    // live bytes beside the map, on its step axis
    const side = model('sideSrc');
    if (c && c.liveStart && e.kind !== 'lanes') {
      side.data = corners(c.liveStart, c.liveBytes, true);
      model('sideFloor').location = e.live.floor;
      model('sidePeak').location = e.live.peak.step === undefined ? null : e.live.peak.step;
    } else {
      side.data = {x: [], y: []};
      model('sidePeak').location = null;
      model('sideFloor').location = null;
    }
  }

  function showLiveness(t, c) {
    const e = c ? c.e : null;
    const live = e && e.live;
    const note = $('live-note');
    const src = model('liveSrc'), peak = model('livePeakSrc'), mot = model('motSrc');
    if (!live) {
      src.data = {x: [], y: []}; peak.data = {x: [], y: []}; mot.data = {x: [], y: [], tile: []};
      model('livePeak').location = null; model('liveFloor').location = null;
      note.innerHTML = !e ? 'Tile ' + t + ' is not embedded in this file: no liveness for it here.'
        : '<b>Timeline unavailable</b>: the report has no equivalenceClassSteps and the interference of tile ' + t + ' has no interval model, so no order of program steps can be drawn without inventing one.';
      $('peak-table').innerHTML = '';
      return;
    }
    src.data = corners(c.liveStart, c.liveBytes, false);
    let ymax = Math.max(TM, live.peakBytes);
    if (live.kind === 'steps' && DATA.maxOverTiles) {
      if (!mot._tm) {
        const s = decode(DATA.maxOverTiles.start), b = decode(DATA.maxOverTiles.bytes), w = decode(DATA.maxOverTiles.tile);
        const cc = corners(s, b, false);
        const tiles = [];
        for (let k = 0; k < w.length; k++) tiles.push(w[k], w[k]);
        mot._tm = {x: cc.x, y: cc.y, tile: tiles};
      }
      mot.data = mot._tm;
      ymax = Math.max(ymax, Math.max(...mot._tm.y));
    } else {
      mot.data = {x: [], y: [], tile: []};
    }
    model('liveFloor').location = live.floor;
    const p = live.peak;
    const n = c.liveStart.length;
    model('liveX').setv({start: n ? c.liveStart[0] : 0, end: n ? c.liveStart[n - 1] + 1 : 1});
    model('liveY').setv({start: 0, end: ymax * 1.06});
    model('liveXAxis').axis_label = live.kind === 'steps' ? 'program step' : 'program point (reconstructed from interference)';
    let text = live.kind === 'steps' ? 'Program steps from the report\'s equivalenceClassSteps.'
      : '<b>Reconstructed from interference</b>: the report has no equivalenceClassSteps; these are program points in an order consistent with the interference (recovered only up to what it determines), not the program\'s own steps. No maximum over tiles: each tile has its own order.';
    if (p.step !== undefined) {
      model('livePeak').location = p.step;
      peak.data = {x: [p.step], y: [live.peakBytes]};
      const unit = live.kind === 'steps' ? 'program step' : 'program point';
      text += '<br>Peak at ' + unit + ' <b id="peak-step">' + fmt(p.step) + '</b>' + (p.end - 1 > p.step ? ' (to ' + fmt(p.end - 1) + ')' : '') + ': <b>' + fmt(live.peakBytes) + ' B</b> live, ' + fmt(p.count) + ' variables (' + fmt(p.alwaysLive) + ' always-live); always-live floor ' + fmt(live.floor) + ' B.';
      if (e.oom && live.peakBytes > e.oom.maxLiveBytes) {
        text += ' The step peak is above the maximum live bytes (' + fmt(e.oom.maxLiveBytes) + ' B): variables of different branches share steps without interfering, so they may share memory.';
      }
      const rows = p.rows.map((k) => [esc(c.names[k]) + ((c.flags[k] & 1) ? ' <i>(always-live)</i>' : ''), c['var'][k], esc(DATA.categories[c.cat[k]]), c.cls[k], c.size[k]]);
      $('peak-table').innerHTML = '<h3>Variables live at the peak' + (p.count > rows.length ? ' (largest ' + rows.length + ' of ' + fmt(p.count) + ')' : '') + '</h3>' + table(['name', 'var', 'category', 'class', 'bytes'], rows);
    } else {
      peak.data = {x: [], y: []};
      model('livePeak').location = null;
      $('peak-table').innerHTML = '';
    }
    if (live.unplaced) text += '<br>' + fmt(live.unplaced) + ' variable(s) whose class has an empty interval are on no step.';
    note.innerHTML = text;
  }

  function showCompare(t, c) {
    if (!DATA.compareLabel) return;
    const e = c ? c.e : null;
    for (const [name, x0] of [['cmpA', c ? c.x0 : null], ['cmpB', c ? c.x0b : null]]) {
      const md = c ? mapData(c, x0) : emptyMap();
      model(name + 'Src').data = md;
      if (name === 'cmpA') {
        const d = model('cmpOverview').data;
        setRanges('cmpA', extent(md, Math.max(d.a[t], d.b[t])));
      }
    }
    const d = model('cmpOverview').data;
    $('cmp-tile').innerHTML = '<h3>Tile ' + t + '</h3><p>Highest end: report ' + fmt(d.a[t]) + ' B, ' + esc(DATA.compareLabel) + ' ' + fmt(d.b[t]) + ' B (' + (d.delta[t] >= 0 ? '+' : '') + fmt(d.delta[t]) + ' B).' + (e ? '' : ' Full maps of this tile are not in this file.') + '</p>';
  }

  // many IPUs: the tile overview shows one IPU's tiles, picked in the IPU strip
  let ipuShown = null;
  function ipuOf(t) {
    let k = 0;
    for (const b of T.ipuBoundaries) { if (t >= b) k++; else break; }
    return k;
  }

  function showIpu(k) {
    const src = doc.get_model_by_name('ipuOverview');
    if (!src) return;
    k = Number(k);
    const d = src.data;
    const a = d.first[k] - 0.5, b = d.last[k] + 0.5;
    model('ovX').setv({bounds: [a, b], start: a, end: b, reset_start: a, reset_end: b});
    ipuShown = k;
    const sel = src.selected.indices;
    if (sel.length !== 1 || sel[0] !== k) src.selected.indices = [k];
    $('ipu-note').innerHTML = fmt(d.ipu.length) + ' IPUs (' + esc(T.ipuHow) + '). Memory per tile below: <b id="ipu-shown">IPU ' + k + '</b>, tiles ' + fmt(d.first[k]) + ' to ' + fmt(d.last[k]) + ', ' + fmt(d.over[k]) + ' out of memory, fullest <a href="#tile=' + d.fullest[k] + '">tile ' + d.fullest[k] + '</a>. Click another IPU to show its tiles, or pick any tile by number above.';
    document.body.dataset.ipu = String(k);
  }

  // a tile whose map is not in the file: from the server of tilemem html --serve, if the page
  // came from one; else the page says how to get it
  const loading = new Set();
  function fetchTile(t) {
    if (!location.protocol.startsWith('http') || loading.has(t)) return false;
    loading.add(t);
    fetch('tile/' + t + '.json').then((r) => {
      if (!r.ok) throw new Error('HTTP ' + r.status);
      return r.json();
    }).then((e) => {
      DATA.tiles[String(t)] = e;
      included.set(t, e.why);
      if (current === t) select(t, false);
    }).catch((err) => {
      if (current === t) $('map-note').innerHTML = '<b>Tile ' + t + ' could not be loaded</b> from the server (' + esc(err.message) + ').';
    }).finally(() => loading.delete(t));
    return true;
  }

  function notEmbedded(t) {
    const src = esc(DATA.source || 'REPORT');
    return '<b>The full map of tile ' + t + ' is not in this file</b> (to keep it small, only the tiles listed at the top are). To see it: <code>tilemem html ' + src + ' --tiles ' + t + '</code> writes a page that embeds it, or <code>tilemem html ' + src + ' --serve</code> serves a page that loads any tile\'s map from the report when you ask for it.';
  }

  function select(t, scroll) {
    t = Number(t);
    if (!Number.isInteger(t) || t < 0 || t >= T.numTiles) return;
    current = t;
    if (ipuShown !== null && ipuOf(t) !== ipuShown) showIpu(ipuOf(t));
    const c = included.has(t) ? tileCols(t) : null;
    const asked = !c && fetchTile(t);
    const o = overviewAt(t);
    $('tile-title').textContent = 'tile ' + t + (o.over > 0 ? ' (out of memory by ' + fmt(o.over) + ' B)' : '');
    $('tile-title').className = o.over > 0 ? 'oom' : '';
    $('live-title').textContent = 'tile ' + t;
    $('tile-figures').innerHTML = figuresHtml(t);
    $('verdict').innerHTML = verdictHtml(t, c ? c.e : null);
    $('oom-peak').innerHTML = oomPeakHtml(c ? c.e : null);
    $('map-note').innerHTML = c ? ('Full map embedded (' + esc(c.e.why.join(', ')) + '): ' + fmt(c.n) + ' variables. Hover a rectangle for the variable; wheel to zoom, drag to pan.')
      : asked ? 'Loading the map of tile ' + t + ' from the server...' : notEmbedded(t);
    showMap(t, c);
    showLiveness(t, c);
    showCompare(t, c);
    const pick = $('tile-pick');
    pick.value = included.has(t) ? String(t) : '';
    $('tile-any').value = String(t);
    document.body.dataset.tile = String(t);
    const want = '#tile=' + t;
    if (location.hash !== want && !(location.hash.startsWith('#tile=' + t + '&'))) history.replaceState(null, '', want);
    if (scroll) $('tileview').scrollIntoView();
  }

  function fromHash() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ''));
    if (!params.has('tile')) return false;
    select(params.get('tile'), false);
    const view = params.get('view');
    if (view && $(view)) $(view).scrollIntoView();
    else $('tileview').scrollIntoView();
    return true;
  }

  function header() {
    const pick = $('tile-pick');
    pick.innerHTML = '<option value="">(not embedded)</option>' + DATA.included.map((c) => '<option value="' + c.tile + '">tile ' + c.tile + ' - ' + esc(c.why.join(', ')) + '</option>').join('');
    pick.addEventListener('change', () => { if (pick.value !== '') select(pick.value, true); });
    const any = $('tile-any');
    any.max = String(T.numTiles - 1);
    any.addEventListener('change', () => select(any.value, true));
    const inc = DATA.included.map((c) => '<a href="#tile=' + c.tile + '">' + c.tile + '</a>' + (c.why.includes('out of memory') ? '*' : ''));
    let text = 'Full maps in this file for ' + inc.length + ' of ' + fmt(T.numTiles) + ' tiles: ' + inc.join(', ') + ' (* out of memory); the overview covers every tile.';
    const left = Object.entries(DATA.leftOut || {});
    if (left.length) text += ' Left out for the size budget: ' + left.map(([why, n]) => fmt(n) + ' ' + why).join(', ') + ' tile(s); use --tiles to add some.';
    $('included').innerHTML = text;
    if (doc.get_model_by_name('ipuOverview')) {
      const d = doc.get_model_by_name('ipuOverview').data;
      let worst = 0;
      for (let k = 1; k < d.ipu.length; k++) if (d.over[k] * 2 ** 40 + d.fullestIncl[k] > d.over[worst] * 2 ** 40 + d.fullestIncl[worst]) worst = k;
      showIpu(worst);
    } else if (T.ipuBoundaries.length) $('ipu-note').textContent = (T.ipuBoundaries.length + 1) + ' IPUs: dashed lines mark where each starts (' + T.ipuHow + ').';
    if (DATA.compareLabel) {
      const cmp = DATA.compare;
      const rows = cmp.changed.slice(0, 300).map((r) => ['<a href="#tile=' + r.tile + '&view=compare">' + r.tile + '</a>', r.endA, r.endB, r.endB - r.endA, r.overA, r.overB]);
      $('cmp-note').innerHTML = esc(DATA.compareLabel) + ': ' + fmt(cmp.changed.length) + ' tile(s) changed end address or overflow; tiles that fit: ' + fmt(cmp.fitA) + ' with the report\'s allocation, ' + fmt(cmp.fitB) + ' with ' + esc(DATA.compareLabel) + '.';
      $('cmp-changed').innerHTML = '<h3>Tiles whose end address or overflow changed' + (cmp.changed.length > 300 ? ' (first 300, largest change first)' : '') + '</h3>' + table(['tile', 'end (report)', 'end (' + esc(DATA.compareLabel) + ')', 'change', 'overflow (report)', 'overflow (' + esc(DATA.compareLabel) + ')'], rows);
    }
  }

  function start() {
    doc = window.Bokeh.documents[0];
    header();
    window.addEventListener('hashchange', fromHash);
    if (!fromHash()) {
      const first = DATA.included.length ? DATA.included[0].tile : 0;
      select(first, false);
    }
    window.tilemem.ready = true;
    document.body.dataset.ready = '1';
  }

  function fail(err) {
    console.error(err);
    const box = document.createElement('p');
    box.className = 'error';
    box.textContent = 'This page failed to start: ' + err;
    document.body.prepend(box);
  }

  window.tilemem = {select: (t, scroll) => select(t, scroll), showIpu: (k) => showIpu(k), data: DATA, ready: false, current: () => current};
  const t0 = Date.now();
  (function wait() {
    const B = window.Bokeh;
    if (B && B.documents && B.documents.length && B.documents[0].get_model_by_name('mapSrc')) {
      try { start(); } catch (err) { fail(err); }
    } else if (Date.now() - t0 > 60000) {
      fail('the plotting library did not start within 60 s');
    } else {
      setTimeout(wait, 20);
    }
  })();
})();
