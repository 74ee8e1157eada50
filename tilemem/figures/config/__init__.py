"""``tilemem config``: the whole configuration that fits (IPUs, layers per IPU, each stage's
levers, the micro-batch), searched jointly from one report, with margins measured against
compiled programs (``margins``)."""
