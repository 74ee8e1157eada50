"""Write examples/seed.json: the extract of the lowered-variables report doc (004) made whole.

The doc shows one variable (var 0, ``v1#0``), two interference lists and the allocation order
of two tiles. This completes it: every variable the order names exists on its tile with a
plausible category, the offsets form a valid allocation (two pairs share bytes because their
classes do not interfere), and classes 2..35 get lists. The doc's own lists are kept as
printed: class 0 lists itself and the relation is not symmetric (class 1 names 13, 13 does
not name 1), which readers must tolerate.

Run: python examples/make_seed.py
"""
import json
from pathlib import Path

# var: (tile, name, size, alignment, offset, category, class, flags, constraints)
A = dict(alwaysLive=True)
CODE = dict(alwaysLive=True, executable=True)
VARS = {
    2517: (0, "controlCode#0", 352, 8, 0, "controlCode", 2, CODE, {}),
    0: (0, "v1#0", 16, 8, 352, "variable", 21, {}, {}),
    9: (0, "vertexCode#0", 1024, 8, 368, "vertexCode", 3, dict(CODE, vertexCode=True), {}),
    6: (0, "stack#0", 2048, 8, 1392, "stack", 4, A, {}),
    1301: (0, "layer0/weights#0", 256, 16, 131072, "variable", 16,
           dict(inInterleavedMem=True), {}),
    1242: (0, "layer0/in#0", 64, 8, 3440, "variable", 0, {},
           {"elementConstraints": [6257]}),
    6257: (0, "layer0/out#0", 64, 8, 16384, "variable", 19, {},
           {"elementConstraints": [1242]}),
    6258: (0, "message#0", 128, 4, 3440, "message", 13, {}, {}),
    2519: (1, "controlCode#1", 288, 8, 0, "controlCode", 2, CODE, {}),
    11: (1, "vertexCode#1", 512, 8, 288, "vertexCode", 3, dict(CODE, vertexCode=True), {}),
    1270: (1, "stack#1", 1024, 8, 800, "stack", 4, A, {}),
    8: (1, "vertexInstanceState#1", 96, 4, 1824, "vertexInstanceState", 5, A, {}),
    1303: (1, "layer0/weights#1", 512, 16, 131072, "variable", 16,
           dict(inInterleavedMem=True), {}),
    1271: (1, "layer0/in#1", 128, 8, 1920, "variable", 1, {}, {"regionConstraints": [1272]}),
    1272: (1, "layer0/acts#1", 128, 16, 131584, "variable", 20, dict(inInterleavedMem=True),
           {"regionConstraints": [1271]}),
    6253: (1, "message#1", 64, 4, 2048, "message", 13, {}, {}),
    6254: (1, "rearrangement#1", 64, 8, 1920, "rearrangement", 14, {}, {}),
}
FLAGS = ("isConstant", "alwaysLive", "executable", "vertexCode", "lowest256KB")
ORDER = [[2517, 9, 6, 1301, 1242, 6257, 6258, 0], [2519, 11, 1270, 8, 1303, 1271, 1272, 6253, 6254]]
# As printed in 004 (self entry in list 0; 1 -> 13 but not 13 -> 1).
L0 = [0, 16, 19, 20, 22, 25, 26, 28, 29, 30, 31, 32, 33, 34, 35]
L1 = [13, 16, 19, 20, 22, 25, 26, 28, 29, 30, 32, 33, 34, 35]


def main():
    lists = [L0, L1] + [sorted(c for c in (0,) if k in L0) for k in range(2, 36)]
    vars_ = []
    for var, (tile, name, size, al, off, cat, cls, flags, cons) in sorted(VARS.items()):
        info = {"allocated": True, "tile": tile, "name": name, "sizeBytes": size,
                "alignment": al, "offset": off, "category": cat}
        info.update({f: flags.get(f, False) for f in FLAGS})
        info["equivalenceClass"] = cls
        info["inInterleavedMem"] = flags.get("inInterleavedMem", False)
        info.update(cons)
        vars_.append({"var": var, "info": info})
    report = {
        "numTiles": 2,
        "targetMemoryInfo": {
            "tileMemory": 262144, "interleavedMemoryStart": 131072,
            "memoryElementOffsets": [0, 16384, 32768, 49152, 65536, 81920, 98304, 114688,
                                     131072, 163840, 196608, 229376],
            "supervisorInstrFetchDelay": 64},
        "vars": vars_,
        "equivalenceClassInterference": lists,
        "equalAddressConstraints": [],
        "allocationOrderByTile": ORDER,
    }
    out = Path(__file__).with_name("seed.json")
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
