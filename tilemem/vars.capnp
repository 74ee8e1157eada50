# tilemem's Cap'n Proto schema for lowered-variables reports.
#
# This is tilemem's OWN schema, not Poplar's: Poplar's vars.capnp schema is not public. It
# mirrors the JSON report (004) field for field, but stores the big arrays as columns: each
# column is the little-endian bytes of one numpy dtype, split in chunks below Cap'n Proto's
# 2^29-element list limit, so a reader maps the file and views the columns without copying.
# Lists of lists (constraints, interference, allocation order) are CSR pairs (indptr, indices).
# Constraint and allocation-order entries are var ids, as in the JSON report.
@0x91d93080f9b439fc;

struct Chunk {
  data @0 :Data;
}

struct Column {
  dtype @0 :Text;           # numpy dtype string, e.g. "<i8", "|b1", "|u1", "<i2"
  length @1 :UInt64;        # number of elements
  chunks @2 :List(Chunk);   # concatenated in order; each below 2^29 bytes
}

struct Csr {
  indptr @0 :Column;        # numRows + 1 offsets into indices
  indices @1 :Column;
}

struct TargetMemoryInfo {
  tileMemory @0 :UInt64;
  interleavedMemoryStart @1 :UInt64;
  memoryElementOffsets @2 :List(UInt64);
  supervisorInstrFetchDelay @3 :Int64;
  hasSupervisorInstrFetchDelay @4 :Bool;
}

struct Report {
  formatVersion @0 :UInt32;             # 1
  numTiles @1 :UInt32;
  targetMemoryInfo @2 :TargetMemoryInfo;

  # vars[].var and vars[].info, one column per field, one row per variable.
  var @3 :Column;
  allocated @4 :Column;
  tile @5 :Column;
  sizeBytes @6 :Column;
  alignment @7 :Column;
  offset @8 :Column;
  category @9 :Column;                  # int16 codes into categoryNames
  categoryNames @10 :List(Text);
  isConstant @11 :Column;
  alwaysLive @12 :Column;
  executable @13 :Column;
  vertexCode @14 :Column;
  lowest256KB @15 :Column;
  equivalenceClass @16 :Column;
  inInterleavedMem @17 :Column;
  nameBlob @18 :Column;                 # UTF-8 bytes of all names
  nameOffsets @19 :Column;              # numVars + 1 offsets into nameBlob
  elementConstraints @20 :Csr;
  regionConstraints @21 :Csr;

  equivalenceClassInterference @22 :Csr; # symmetric, no self entries
  allocationOrderByTile @23 :Csr;

  # tilemem extension (optional): per class [start, end) program steps, int64 pairs.
  hasEquivalenceClassSteps @24 :Bool;
  equivalenceClassSteps @25 :Column;

  # tilemem extension (optional): tiles per IPU (the graph profile's tilesPerIPU); 0 = absent.
  tilesPerIPU @26 :UInt32;

  # tilemem extension: the interference holds only the pairs of classes that share a tile
  # (a report over several IPUs: conflicts are only asked within a tile); interferenceDropped
  # entries (each direction counts) of the relation as written were left out, -1 when they
  # were never built (generate --ipus N finds the pairs IPU by IPU). A file without it
  # (older) is pruned when read.
  interferencePruned @27 :Bool;
  interferenceDropped @28 :Int64;
}
