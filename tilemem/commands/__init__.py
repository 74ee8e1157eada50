"""One module per CLI command; each keeps its imports local so start-up stays fast."""
