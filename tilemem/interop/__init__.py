"""Other tools' formats: MiniMalloc CSV (``minimalloc``)."""
