"""NumPy's legacy ``np.random.*``: the singleton ``np.random.mtrand._rand``.

Recorded by ``sources/numpy.py``, imported only when the stream is traced.
"""

from .._streams import Stream

STREAM = Stream(
    name="numpy",
    module="numpy.random",
    source="rngtrace.sources.numpy:NumpySource",
    seed_call="np.random.seed(0)",
    own_generator="np.random.default_rng(seed)",
    make_generator="rng = np.random.default_rng({seed})",
    generator_name="rng",
    # NumPy's documented correspondence from the legacy functions to Generator's methods.
    renames={
        "rand": "random",
        "random_sample": "random",
        "ranf": "random",
        "sample": "random",
        "randn": "standard_normal",
        "randint": "integers",
        "random_integers": "integers",
        "tomaxint": "integers",
    },
    per_process_fix="seed each process from its id (np.random.seed(base + worker_id)) or draw from "
    "np.random.default_rng(seed + worker_id) in each",
    entropy_at_start=True,
    library_files=("numpy/random/",),
    import_names={"np": "numpy"},
    shape_arguments=frozenset({"rand", "randn"}),
    inclusive_high=frozenset({"random_integers"}),
    no_equivalent={"tomaxint": "Generator has no tomaxint"},
    entropy_seeded={
        "numpy.random.default_rng": "",
        "numpy.random.RandomState": "",
        "numpy.random.SeedSequence": "",
    },
    values_change="NumPy's Generator draws other values than the legacy stream for the same seed (and its "
    "normal, exponential and gamma samplers use other algorithms)",
)
