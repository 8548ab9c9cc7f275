"""PyTorch's default generators: the CPU's (``torch.default_generator``) and each CUDA device's.

Recorded by ``sources/torch.py``, imported only when the stream is traced.
"""

from .._streams import Stream

STREAM = Stream(
    name="torch",
    module="torch",
    source="rngtrace.sources.torch:TorchSource",
    seed_call="torch.manual_seed(0)",
    own_generator="torch.Generator().manual_seed(seed) passed as generator=",
    make_generator="g = torch.Generator().manual_seed({seed})",
    generator_name="g",
    generator_argument=True,
    # Their draws take no generator= parameter: only seeding the global stream fixes them.
    no_generator=frozenset(
        {
            "dropout",
            "dropout1d",
            "dropout2d",
            "dropout3d",
            "alpha_dropout",
            "feature_alpha_dropout",
            "rrelu",
            "scaled_dot_product_attention",
            "feature_dropout",
            "native_dropout",
            "dropout_",
            "alpha_dropout_",
            "feature_dropout_",
            "feature_alpha_dropout_",
            "rrelu_",
        }
    ),
    per_process_fix="seed each process from its id (torch.manual_seed(base + worker_id)) or pass each a "
    "torch.Generator seeded from its id",
    fork_call="torch.random.fork_rng()",
    library_files=("torch/random.py", "torch/cuda/random.py"),
    # Builds differ: 2.13 starts the CPU generator from OS entropy; a build that starts it from
    # the fixed default seed says so where a trace sees the program start (TorchSource.starts_fixed).
    entropy_at_start=True,
    entropy_seeded={
        "torch.Generator.seed": "manual_seed",
        "torch.seed": "manual_seed",
        "torch.cuda.seed": "manual_seed",
        "torch.cuda.seed_all": "manual_seed_all",
    },
)
