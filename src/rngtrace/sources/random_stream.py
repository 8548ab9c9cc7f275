"""Python's ``random`` module: the hidden ``random.Random`` instance behind ``random.random()``.

Recorded by ``sources/random.py``.
"""

from .._streams import Stream

STREAM = Stream(
    name="random",
    module="random",
    source="rngtrace.sources.random:RandomSource",
    seed_call="random.seed(0)",
    own_generator="random.Random(seed)",
    make_generator="rng = random.Random({seed})",
    generator_name="rng",
    per_process_fix="seed each process from its id (random.seed(base + worker_id)) or give each its own "
    "random.Random(seed + worker_id)",
    entropy_at_start=True,
    # CPython reseeds the hidden instance in a forked child (os.register_at_fork).
    reseeded_at_fork=True,
    library_files=("<stdlib>/random.py",),
    entropy_seeded={"random.Random": "", "random.Random.seed": ""},
)
