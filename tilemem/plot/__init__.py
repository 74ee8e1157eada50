"""The PLOT stage: pictures of tile memory drawn over the figures and liveness stages.

- ``tilemem.plot.maps``: static memory maps and per-tile pictures (matplotlib).
- ``tilemem.plot.html``: the one-file interactive report (``tilemem html``).
"""
