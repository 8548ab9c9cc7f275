"""`rngtrace fix`'s rewrites, each from literal source to the literal diff it prints.

Every program here is traced for real (as `rngtrace run` traces one: from its start), then
fixed from the trace's findings; `every_draw` is `--all`. The mapping from NumPy's legacy
functions to a Generator's methods is NumPy's documented correspondence.
"""

from __future__ import annotations

import runpy
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("libcst")

import rngtrace.fix as fix_face
from rngtrace import rng_trace


def bare(diff: str) -> str:
    """The diff with no trailing spaces (a blank context line is one space), as literals here write it."""
    return "".join(line.rstrip() + "\n" for line in diff.splitlines())


@pytest.fixture
def fixed(tmp_path, monkeypatch):
    """Trace ``source`` as prog.py (beside ``files``), fix it; return the diff (or the Result, ``result=True``)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def run(source: str, every_draw: bool = False, result: bool = False, **files: str):
        for name, text in files.items():
            (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        path = tmp_path / "prog.py"
        path.write_text(textwrap.dedent(source))
        try:
            with rng_trace(print=False) as trace:
                trace.from_start = True
                runpy.run_path(str(path), run_name="__main__")
        finally:
            for name in files:
                sys.modules.pop(name, None)
        done = fix_face.fix(trace, every_draw)
        return done if result else bare(fix_face.diff(done))

    return run


# -- NumPy's legacy functions -> a Generator's methods -------------------------------------------


def test_rand_and_randn_take_the_shape_as_one_tuple(fixed):
    source = """\
        import numpy as np

        a = np.random.rand(2, 3)
        b = np.random.rand()
        c = np.random.rand(3)
        shape = (2, 2)
        d = np.random.randn(*shape)
        e = np.random.randn(4, 5)
        """
    assert fixed(source) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,8 +1,10 @@
         import numpy as np

        -a = np.random.rand(2, 3)
        -b = np.random.rand()
        -c = np.random.rand(3)
        +rng = np.random.default_rng(0)
        +
        +a = rng.random((2, 3))
        +b = rng.random()
        +c = rng.random(3)
         shape = (2, 2)
        -d = np.random.randn(*shape)
        -e = np.random.randn(4, 5)
        +d = rng.standard_normal(shape)
        +e = rng.standard_normal((4, 5))
        """)  # fmt: skip


@pytest.mark.filterwarnings("ignore:This function is deprecated:DeprecationWarning")
def test_randint_is_integers_and_random_integers_includes_its_high_end(fixed):
    source = """\
        import numpy as np

        a = np.random.randint(0, 10, size=3)
        b = np.random.random_integers(1, 6, size=2)
        c = np.random.random_integers(6)
        """
    assert fixed(source) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,5 +1,7 @@
         import numpy as np

        -a = np.random.randint(0, 10, size=3)
        -b = np.random.random_integers(1, 6, size=2)
        -c = np.random.random_integers(6)
        +rng = np.random.default_rng(0)
        +
        +a = rng.integers(0, 10, size=3)
        +b = rng.integers(1, 6, size=2, endpoint=True)
        +c = rng.integers(1, 6, endpoint=True)
        """)  # fmt: skip


def test_random_sample_ranf_and_sample_are_random(fixed):
    source = """\
        import numpy as np

        a = np.random.random_sample(3)
        b = np.random.ranf(3)
        c = np.random.sample(3)
        d = np.random.random((2, 2))
        """
    assert fixed(source) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,6 +1,8 @@
         import numpy as np

        -a = np.random.random_sample(3)
        -b = np.random.ranf(3)
        -c = np.random.sample(3)
        -d = np.random.random((2, 2))
        +rng = np.random.default_rng(0)
        +
        +a = rng.random(3)
        +b = rng.random(3)
        +c = rng.random(3)
        +d = rng.random((2, 2))
        """)  # fmt: skip


def test_choice_permutation_shuffle_and_the_distributions_keep_their_names(fixed):
    source = """\
        import numpy as np

        x = np.arange(5)
        a = np.random.choice([1, 2, 3], 2)
        b = np.random.permutation(5)
        np.random.shuffle(x)
        c = np.random.normal(0, 1, 3)
        d = np.random.uniform(size=2)
        e = np.random.exponential(2.0)
        f = np.random.binomial(10, 0.5)
        g = np.random.poisson(3)
        h = np.random.beta(1, 2)
        """
    assert fixed(source) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,12 +1,14 @@
         import numpy as np

        +rng = np.random.default_rng(0)
        +
         x = np.arange(5)
        -a = np.random.choice([1, 2, 3], 2)
        -b = np.random.permutation(5)
        -np.random.shuffle(x)
        -c = np.random.normal(0, 1, 3)
        -d = np.random.uniform(size=2)
        -e = np.random.exponential(2.0)
        -f = np.random.binomial(10, 0.5)
        -g = np.random.poisson(3)
        -h = np.random.beta(1, 2)
        +a = rng.choice([1, 2, 3], 2)
        +b = rng.permutation(5)
        +rng.shuffle(x)
        +c = rng.normal(0, 1, 3)
        +d = rng.uniform(size=2)
        +e = rng.exponential(2.0)
        +f = rng.binomial(10, 0.5)
        +g = rng.poisson(3)
        +h = rng.beta(1, 2)
        """)  # fmt: skip


def test_aliases_are_followed_and_the_generator_is_spelled_as_the_file_imports_numpy(fixed):
    source = """\
        from numpy.random import rand
        import numpy.random as npr

        a = rand(2)
        b = npr.randn(3)
        """
    assert fixed(source) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,5 +1,7 @@
         from numpy.random import rand
         import numpy.random as npr

        -a = rand(2)
        -b = npr.randn(3)
        +rng = npr.default_rng(0)
        +
        +a = rng.random(2)
        +b = rng.standard_normal(3)
        """)  # fmt: skip


def test_a_file_that_imports_no_numpy_module_gets_the_import_its_generator_needs(fixed):
    source = """\
        from numpy.random import rand, seed

        seed(7)
        a = rand(2, 2)
        """
    assert fixed(source, every_draw=True) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,4 +1,5 @@
         from numpy.random import rand, seed
        +import numpy as np

        -seed(7)
        -a = rand(2, 2)
        +rng = np.random.default_rng(7)
        +a = rng.random((2, 2))
        """)  # fmt: skip


def test_the_users_seed_becomes_the_generators_seed_where_it_was(fixed):
    source = """\
        import numpy as np

        np.random.seed(42)
        a = np.random.rand(3)  # the first draw
        b = np.random.normal(size=2)
        """
    assert fixed(source, every_draw=True) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,5 +1,5 @@
         import numpy as np

        -np.random.seed(42)
        -a = np.random.rand(3)  # the first draw
        -b = np.random.normal(size=2)
        +rng = np.random.default_rng(42)
        +a = rng.random(3)  # the first draw
        +b = rng.normal(size=2)
        """)  # fmt: skip


def test_a_seed_in_another_function_than_the_draws_makes_the_files_generator_anew_where_it_was(fixed):
    source = """\
        import numpy as np


        def setup():
            np.random.seed(1)


        def draw():
            return np.random.rand()


        setup()
        x = draw()
        """
    assert fixed(source, every_draw=True) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,12 +1,15 @@
         import numpy as np
        +
        +rng = np.random.default_rng(1)


         def setup():
        -    np.random.seed(1)
        +    global rng
        +    rng = np.random.default_rng(1)


         def draw():
        -    return np.random.rand()
        +    return rng.random()


         setup()
        """)  # fmt: skip


def test_a_seed_from_entropy_is_given_a_value_and_a_generator_made_for_it_seed_zero(fixed):
    source = """\
        import numpy as np

        np.random.seed()
        a = np.random.rand()
        """
    assert "-np.random.seed()\n+np.random.seed(0)\n" in fixed(source)  # what the finding names: the seed
    assert "+rng = np.random.default_rng(0)\n+a = rng.random()\n" in fixed(source, every_draw=True)


# -- Python's random ------------------------------------------------------------------------------


def test_random_module_calls_become_a_random_instance_of_the_same_seed(fixed):
    source = """\
        import random
        from random import choice

        random.seed(1)
        a = random.random()
        x = [1, 2, 3]
        random.shuffle(x)
        b = random.randint(1, 6)
        c = choice(x)
        """
    assert fixed(source, every_draw=True) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,9 +1,9 @@
         import random
         from random import choice

        -random.seed(1)
        -a = random.random()
        +rng = random.Random(1)
        +a = rng.random()
         x = [1, 2, 3]
        -random.shuffle(x)
        -b = random.randint(1, 6)
        -c = choice(x)
        +rng.shuffle(x)
        +b = rng.randint(1, 6)
        +c = rng.choice(x)
        """)  # fmt: skip


def test_numpy_and_random_in_one_file_get_a_generator_each(fixed):
    source = """\
        import random

        import numpy as np

        a = np.random.rand()
        b = random.random()
        """
    diff = fixed(source)
    assert "+rng = random.Random(0)\n+numpy_rng = np.random.default_rng(0)\n" in diff  # in the log's order
    assert "+a = numpy_rng.random()\n+b = rng.random()\n" in diff


# -- torch ----------------------------------------------------------------------------------------


def test_torch_draws_at_your_lines_take_a_generator(fixed):
    pytest.importorskip("torch")
    source = """\
        import torch
        from torch import nn

        w = torch.empty(3, 3)
        nn.init.normal_(w)
        order = torch.randperm(5)
        """
    assert fixed(source) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,6 +1,8 @@
         import torch
         from torch import nn

        +g = torch.Generator().manual_seed(0)
        +
         w = torch.empty(3, 3)
        -nn.init.normal_(w)
        -order = torch.randperm(5)
        +nn.init.normal_(w, generator=g)
        +order = torch.randperm(5, generator=g)
        """)  # fmt: skip


def test_a_tensor_method_in_another_file_and_the_draw_after_it_take_generators_seeded_as_your_seed(fixed):
    pytest.importorskip("torch")
    helper = """\
        import torch


        def noise():
            w = torch.empty(2)
            w.uniform_()
            return w
        """
    source = """\
        import torch

        import helper

        torch.manual_seed(3)
        helper.noise()
        x = torch.rand(2)
        """
    assert fixed(source, helper=helper) == textwrap.dedent("""\
        --- a/helper.py
        +++ b/helper.py
        @@ -1,7 +1,9 @@
         import torch
        +
        +g = torch.Generator().manual_seed(0)


         def noise():
             w = torch.empty(2)
        -    w.uniform_()
        +    w.uniform_(generator=g)
             return w
        --- a/prog.py
        +++ b/prog.py
        @@ -2,6 +2,8 @@

         import helper

        +g = torch.Generator().manual_seed(3)
        +
         torch.manual_seed(3)
         helper.noise()
        -x = torch.rand(2)
        +x = torch.rand(2, generator=g)
        """)  # fmt: skip


def test_a_shuffling_dataloader_takes_a_generator_and_the_model_a_seed_right_before_it(fixed):
    pytest.importorskip("torch")
    source = """\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader

        torch.manual_seed(0)
        loader = DataLoader(list(range(32)), batch_size=8, shuffle=True)
        first_batch = next(iter(loader))
        # the model
        model = nn.Linear(4, 2)
        """
    assert fixed(source) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -3,7 +3,8 @@
         from torch.utils.data import DataLoader

         torch.manual_seed(0)
        -loader = DataLoader(list(range(32)), batch_size=8, shuffle=True)
        +loader = DataLoader(list(range(32)), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
         first_batch = next(iter(loader))
         # the model
        +torch.manual_seed(0)
         model = nn.Linear(4, 2)
        """)  # fmt: skip


# -- library calls: their own seed ----------------------------------------------------------------


def test_scikit_learn_calls_take_random_state_in_the_call_or_the_estimators_constructor(fixed):
    source = """\
        import numpy as np
        from sklearn.cluster import KMeans
        from sklearn.model_selection import train_test_split

        np.random.seed(0)
        X = np.random.normal(size=(60, 2))
        train, test = train_test_split(
            X,
            test_size=0.5,
        )
        km = KMeans(n_clusters=2, n_init=1)
        km.fit(train)
        noise = np.random.normal(size=3)
        """
    assert fixed(source) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -2,12 +2,13 @@
         from sklearn.cluster import KMeans
         from sklearn.model_selection import train_test_split

        -np.random.seed(0)
        -X = np.random.normal(size=(60, 2))
        +rng = np.random.default_rng(0)
        +X = rng.normal(size=(60, 2))
         train, test = train_test_split(
             X,
             test_size=0.5,
        +    random_state=0,
         )
        -km = KMeans(n_clusters=2, n_init=1)
        +km = KMeans(n_clusters=2, n_init=1, random_state=0)
         km.fit(train)
        -noise = np.random.normal(size=3)
        +noise = rng.normal(size=3)
        """)  # fmt: skip


def test_scipy_rvs_takes_the_files_generator(fixed):
    source = """\
        import numpy as np
        from scipy import stats

        np.random.seed(5)
        a = stats.norm.rvs(size=3)
        b = np.random.rand()
        """
    assert fixed(source) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,6 +1,6 @@
         import numpy as np
         from scipy import stats

        -np.random.seed(5)
        -a = stats.norm.rvs(size=3)
        -b = np.random.rand()
        +rng = np.random.default_rng(5)
        +a = stats.norm.rvs(size=3, random_state=rng)
        +b = rng.random()
        """)  # fmt: skip


def test_a_library_draw_no_argument_controls_is_left_and_keeps_the_seed(fixed, tmp_path, monkeypatch):
    # An installed package: a file under site-packages is never the user's, never rewritten.
    packages = tmp_path / "site-packages"
    packages.mkdir()
    (packages / "jitterlib.py").write_text("import numpy as np\n\n\ndef init():\n    return np.random.uniform()\n")
    monkeypatch.syspath_prepend(str(packages))
    source = """\
        import numpy as np

        import jitterlib

        np.random.seed(666)
        jitterlib.init()
        x = np.random.rand(1)
        """
    try:
        done = fixed(source, result=True)
    finally:
        sys.modules.pop("jitterlib", None)
    assert bare(fix_face.diff(done)) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -3,5 +3,6 @@
         import jitterlib

         np.random.seed(666)
        +rng = np.random.default_rng(666)
         jitterlib.init()
        -x = np.random.rand(1)
        +x = rng.random(1)
        """)  # fmt: skip
    assert [str(Path(p).name) for p in done.texts] == ["prog.py"]
    header = fix_face.header(done, "run.json")
    assert "init (prog.py:6) draws from numpy inside jitterlib, which takes no seed argument: not rewritten" in header
    assert "numpy's seed stays, the generator made beside it: init (prog.py:6) still draws from numpy's" in header


def test_a_library_that_reseeds_after_your_seed_no_longer_governs_your_draws(fixed, tmp_path, monkeypatch):
    packages = tmp_path / "site-packages"
    packages.mkdir()
    (packages / "reseeder.py").write_text("import numpy as np\n\n\ndef setup():\n    np.random.seed(1)\n")
    monkeypatch.syspath_prepend(str(packages))
    source = """\
        import numpy as np

        import reseeder

        np.random.seed(666)
        reseeder.setup()
        x = np.random.rand(1)
        """
    try:
        done = fixed(source, result=True)
    finally:
        sys.modules.pop("reseeder", None)
    assert [f.kind for f in done.plan.addressed] == ["reseeded"]
    assert bare(fix_face.diff(done)) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -2,6 +2,6 @@

         import reseeder

        -np.random.seed(666)
        +rng = np.random.default_rng(666)
         reseeder.setup()
        -x = np.random.rand(1)
        +x = rng.random(1)
        """)  # fmt: skip
