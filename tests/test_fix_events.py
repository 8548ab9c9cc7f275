"""`rngtrace fix` from literal events and findings: what no trace records yet, and the edges.

Generators made from OS entropy (`np.random.default_rng()`, `random.Random()`,
`torch.Generator().seed()`) are recorded as events of kind `entropy` named by an `unseeded`
finding (tests/test_entropy_generators.py); the rewrite that gives them a seed is specified
here on literal events at literal lines. So are the calls with no Generator equivalent, files that
do not parse, files of a library and files changed since the run.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("libcst")

import rngtrace.fix as fix_face
from rngtrace._model import Event, Finding, Frame


def unseeded(path: Path, line: int, api: str, kind: str = "entropy", function: str = "<module>") -> tuple:
    """The events and finding of one draw or generator at ``path:line`` that nothing seeded."""
    stream = api.split(".")[0]
    event = Event(0, stream, kind, api, None, (Frame(str(path), line, function),), "MainThread", 1)
    return [event], [Finding("unseeded", stream, (1,), f"{api} at line {line} is unseeded", (0,), "seed it")]


def bare(diff: str) -> str:
    return "".join(line.rstrip() + "\n" for line in diff.splitlines())


@pytest.fixture
def prog(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def write(source: str) -> Path:
        path = tmp_path / "prog.py"
        path.write_text(textwrap.dedent(source))
        return path

    return write


# -- generators made from OS entropy get a seed ---------------------------------------------------


def test_default_rng_with_no_seed_gets_seed_zero(prog):
    path = prog("""\
        import numpy as np

        rng = np.random.default_rng()
        """)
    done = fix_face.fix_findings(*unseeded(path, 3, "numpy.random.default_rng"))
    assert bare(fix_face.diff(done)) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,3 +1,3 @@
         import numpy as np

        -rng = np.random.default_rng()
        +rng = np.random.default_rng(0)
        """)  # fmt: skip


def test_default_rng_of_none_and_a_random_instance_get_seed_zero(prog):
    path = prog("""\
        import random
        from numpy.random import default_rng

        a = default_rng(None)
        b = random.Random()
        """)
    events, findings = unseeded(path, 4, "numpy.random.default_rng")
    events += [
        Event(1, "random", "entropy", "random.Random", None, (Frame(str(path), 5, "<module>"),), "MainThread", 1)
    ]
    findings += [Finding("unseeded", "random", (1,), "unseeded", (1,), "seed it")]
    assert bare(fix_face.diff(fix_face.fix_findings(events, findings))) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,5 +1,5 @@
         import random
         from numpy.random import default_rng

        -a = default_rng(None)
        -b = random.Random()
        +a = default_rng(0)
        +b = random.Random(0)
        """)  # fmt: skip


def test_a_torch_generator_seeded_from_entropy_is_seeded_by_manual_seed_instead(prog):
    path = prog("""\
        import torch

        g = torch.Generator()
        g.seed()
        torch.seed()
        """)
    events, findings = unseeded(path, 4, "torch.Generator.seed")
    events += [Event(1, "torch", "seed", "torch.seed", None, (Frame(str(path), 5, "<module>"),), "MainThread", 1)]
    findings += [Finding("unseeded", "torch", (1,), "unseeded", (1,), "seed it")]
    assert bare(fix_face.diff(fix_face.fix_findings(events, findings))) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,5 +1,5 @@
         import torch

         g = torch.Generator()
        -g.seed()
        -torch.seed()
        +g.manual_seed(0)
        +torch.manual_seed(0)
        """)  # fmt: skip


def test_a_seed_whose_value_is_used_is_left_and_the_header_says_why(prog):
    path = prog("""\
        import torch

        s = torch.Generator().seed()
        """)
    done = fix_face.fix_findings(*unseeded(path, 3, "torch.Generator.seed"))
    assert done.texts == {}
    assert "its value is used: call .manual_seed(0) instead, which returns another value" in fix_face.header(
        done, "run.json"
    )


# -- what is left as it is, and said ---------------------------------------------------------------


def test_tomaxint_has_no_generator_method_and_keeps_the_seed(prog):
    path = prog("""\
        import numpy as np

        np.random.seed(3)
        a = np.random.tomaxint()
        b = np.random.rand()
        """)
    stack = lambda line: (Frame(str(path), line, "<module>"),)  # noqa: E731
    events = [
        Event(0, "numpy", "seed", "numpy.random.seed", None, stack(3), "MainThread", 1, "3"),
        Event(1, "numpy", "draw", "numpy.random.tomaxint", 1, stack(4), "MainThread", 1),
        Event(2, "numpy", "draw", "numpy.random.rand", 1, stack(5), "MainThread", 1),
    ]
    done = fix_face.fix_findings(events, [], every_draw=True)
    assert bare(fix_face.diff(done)) == textwrap.dedent("""\
        --- a/prog.py
        +++ b/prog.py
        @@ -1,5 +1,6 @@
         import numpy as np

         np.random.seed(3)
        +rng = np.random.default_rng(3)
         a = np.random.tomaxint()
        -b = np.random.rand()
        +b = rng.random()
        """)  # fmt: skip
    header = fix_face.header(done, "run.json")
    assert "numpy.random.tomaxint at prog.py:4 is left as it is: Generator has no tomaxint" in header
    assert "numpy's seed stays, the generator made beside it: prog.py:4" in header


def test_a_file_that_does_not_parse_is_named_and_left_alone(prog):
    path = prog("""\
        import numpy as np

        rng = np.random.default_rng()
        """)
    events, findings = unseeded(path, 3, "numpy.random.default_rng")
    path.write_text("import numpy as np\n\nrng = np.random.default_rng(\n")  # edited since the run
    done = fix_face.fix_findings(events, findings)
    assert done.texts == {}
    assert "prog.py does not parse" in fix_face.header(done, "run.json")


def test_a_call_no_longer_at_its_line_is_left_and_said(prog):
    path = prog("""\
        import numpy as np

        x = 1
        """)
    done = fix_face.fix_findings(*unseeded(path, 3, "numpy.random.default_rng"))
    assert done.texts == {}
    assert "no call of it found at that line (the file changed since the run?)" in fix_face.header(done, "run.json")


def test_a_file_of_an_installed_package_is_never_rewritten(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    library = tmp_path / "site-packages" / "somelib"
    library.mkdir(parents=True)
    path = library / "core.py"
    source = "import numpy as np\n\nrng = np.random.default_rng()\n"
    path.write_text(source)
    done = fix_face.fix_findings(*unseeded(path, 3, "numpy.random.default_rng"))
    assert done.texts == {}
    assert path.read_text() == source
    assert "no line of yours is on the stack" in fix_face.header(done, "run.json")


def test_a_generator_from_entropy_with_no_seeded_form_declared_is_said_not_rewritten(prog):
    path = prog("""\
        import numpy as np

        rng = np.random.Generator(np.random.PCG64())
        """)
    done = fix_face.fix_findings(*unseeded(path, 3, "numpy.random.Generator"))
    assert done.texts == {}
    assert "numpy.random.Generator at prog.py:3 (entropy): no rewrite known for it" in fix_face.header(done, "r.json")
