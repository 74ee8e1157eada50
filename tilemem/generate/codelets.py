"""The vertex types (codelets) each family's program runs, with a relative code size and the
bytes of vertex state per vertex: ``tiledata`` puts each codelet's code on the tiles whose
compute sets run it.
"""
from __future__ import annotations

#: The cnn family's vertex types, as named in 002's profile summary, with a relative code
#: size and the bytes of vertex state per vertex (``sizes`` in 000 "Vertex types"). The code
#: sizes are only relative: the generator scales all vertex code to its share of always-live
#: bytes.
CODELETS: tuple[tuple[str, int, int], ...] = (
    ("poplin::ConvPartial1x1Out<float,float,true,false>", 2400, 28),
    ("poplin::ConvPartial1x1Out<half,float,true,false>", 2600, 28),
    ("poplin::ReduceAdd<float,float>", 900, 16),
    ("poplin::ReduceAdd<float,half>", 950, 16),
    ("popops::ScaledAddSupervisor<float,float,true>", 700, 20),
    ("popops::ScaledAddSupervisor<half,half,true>", 720, 20),
    ("popnn::NonLinearitySupervisor<float,popnn::NonLinearityType::SIGMOID>", 800, 12),
    ("popnn::NonLinearityGradSupervisor<float,popnn::NonLinearityType::SIGMOID>", 820, 16),
    ("popnn::NonLinearitySupervisor<half,popnn::NonLinearityType::RELU>", 600, 12),
    ("popnn::NonLinearityGradSupervisor<half,popnn::NonLinearityType::RELU>", 640, 16),
    ("popops::Reduce<popops::ReduceAdd,float,float,false,2>", 1100, 24),
    ("popops::ScaledReduce<popops::ReduceAdd,float,float,true,1>", 1150, 24),
    ("poplin::Transpose2d<float>", 500, 16),
    ("poplar_rt::DstStridedCopyDA32", 300, 8),
    ("poplar_rt::Memcpy64BitSupervisor", 250, 12),
    ("poplar_rt::MemsetZero64Bit", 120, 8),
    ("popnn::LossSumSquaredTransform<float>", 400, 20),
    ("popops::ReduceMaxClassGather<float,unsigned int>", 450, 24),
    ("popops::AddToChannel<float>", 520, 16),
    ("poprand::SetSeedSupervisor", 350, 28),
)
CODELET_INDEX = {name.split("<")[0].split("::")[-1] + ("<half" in name) * "Half": i
                 for i, (name, _, _) in enumerate(CODELETS)}


def codelet(short: str, half: bool = False) -> int:
    """Index of a codelet by its short name (``"ConvPartial1x1Out"``), half variant if any."""
    return CODELET_INDEX.get(short + ("Half" if half else ""), CODELET_INDEX.get(short))


#: The transformer family's vertex types by short key: (codelet as named in a profile, relative code size, vertex
#: state bytes), as ``CODELETS``; matmuls are poplin convolutions.
TRANSFORMER_CODELETS = {
    "matmul": ("poplin::ConvPartial1x1Out<half,float,true,false>", 2600, 28),
    "reduceAdd": ("poplin::ReduceAdd<float,half>", 950, 16),
    "reduce": ("popops::Reduce<popops::ReduceAdd,half,float,false,0>", 1100, 24),
    "reduceMax": ("popops::Reduce<popops::ReduceMax,half,half,false,0>", 1050, 24),
    "scaledReduce": ("popops::ScaledReduce<popops::ReduceAdd,half,float,true,1>", 1150, 24),
    "scaledAdd": ("popops::ScaledAddSupervisor<float,half,true>", 720, 20),
    "add": ("popops::BinaryOp1DInPlaceSupervisor<popops::expr::BinaryOpType::ADD,half>", 500, 12),
    "exp": ("popops::UnaryOp1DInPlaceSupervisor<popops::expr::UnaryOpType::EXPONENT,half>",
            650, 12),
    "divide": ("popops::BinaryOp1DInPlaceSupervisor<popops::expr::BinaryOpType::DIVIDE,half>",
               520, 12),
    "normalise": ("popops::ScaledAddSupervisor<half,half,true>", 700, 20),
    "gelu": ("popnn::NonLinearitySupervisor<half,popnn::NonLinearityType::GELU>", 900, 12),
    "geluGrad": ("popnn::NonLinearityGradSupervisor<half,popnn::NonLinearityType::GELU>",
                 950, 16),
    "softmaxGrad": ("popops::BinaryOp1DSupervisor<popops::expr::BinaryOpType::MULTIPLY,half>",
                    540, 16),
    "multiSlice": ("popops::MultiSlice<half>", 600, 24),
    "multiUpdateAdd": ("popops::MultiUpdateAdd<half,false>", 700, 28),
    "loss": ("popnn::LossCrossEntropyTransform<half,half>", 450, 20),
    "checkFinite": ("popops::HasNaNOrInf1D<float,true>", 380, 12),
    "adam": ("popops::BinaryOp1DSupervisor<popops::expr::BinaryOpType::DIVIDE,float>", 560, 16),
    "sqrt": ("popops::UnaryOp1DSupervisor<popops::expr::UnaryOpType::SQRT,float>", 480, 12),
    "Memcpy64BitSupervisor": ("poplar_rt::Memcpy64BitSupervisor", 250, 12),
    "zero": ("poplar_rt::MemsetZero64Bit", 120, 8),
    "setSeed": ("poprand::SetSeedSupervisor", 350, 28),
}
