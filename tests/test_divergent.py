"""The ``divergent`` finding, decided in the analysis layer from literal logs: no tracing, no files.

``rngtrace ranks`` (tests/test_ranks.py) gathers the logs a job's ranks saved and
renders this; here each rank's log is a Trace built from literal events.
"""

from __future__ import annotations

import os

from literal_traces import build, draw, moved, seed

from rngtrace._divergent import RankLog, divergent, splits
from rngtrace._findings import ACROSS_RUNS, across_runs

TRAIN = os.path.abspath("train.py")  # under the working directory: findings name it train.py
SITE = os.path.join(os.sep, "venv", "lib", "python3.11", "site-packages", "lib", "aug.py")
FIX = (
    "make every rank draw alike from random: make this draw on every rank, or give the draw that only "
    "some ranks make a generator of its own (random.Random(seed))"
)


def step(value: str = "3", *, extra: bool = False, at: str = TRAIN) -> list[dict]:
    """What each rank runs: a draw, a seed, a draw and, on a straying rank, one more at line 9."""
    events = [
        draw("random.random", 1, (at, 4, "main")),
        seed("random.seed", value, (at, 5, "main")),
        draw("random.random", 1, (at, 6, "main")),
    ]
    return events + ([draw("random.random", 1, (at, 9, "main"))] if extra else [])


def rank(number: int, *events: dict, block: int = 1, pid: int | None = None, overflow: tuple = ()) -> RankLog:
    """Rank ``number``'s log of ``block``, as ``rngtrace ranks`` finds it in the folder."""
    name = f"rank-{number}.json" if block == 1 else f"rank-{number}.{block}.json"
    trace = build(*events, pid=pid or 100 + number, overflow=overflow)
    return RankLog(name, "rank", number, block, trace)


def test_divergent_is_the_one_kind_found_across_runs():
    assert [kind.name for kind in ACROSS_RUNS] == ["divergent"]


def test_ranks_that_seed_by_rank_and_draw_alike_find_nothing():
    assert across_runs([rank(0, *step("3")), rank(1, *step("4"))]) == []


def test_an_extra_draw_on_one_rank_is_divergent_naming_its_line_each_side_and_the_streams_generator():
    (finding,) = across_runs([rank(0, *step()), rank(1, *step(extra=True))])
    assert finding.kind == "divergent" and finding.stream == "random"
    assert finding.message == (
        "random: the ranks stop drawing alike at their 4th random draw or seed: "
        "rank 0 made no more (3 random events in all); "
        "rank 1 drew random.random ×1 at train.py:9; so later draws differ between them"
    )
    assert finding.pids == (100, 101) and finding.events == (-1, 3)
    assert finding.fix == FIX


def test_three_ranks_are_grouped_by_what_they_made_rank_0s_side_first():
    (finding,) = divergent([rank(0, *step()), rank(1, *step(extra=True)), rank(2, *step())])
    assert "ranks 0 and 2 made no more (3 random events in all); rank 1 drew" in finding.message
    assert finding.pids == (100, 102, 101) and finding.events == (-1, -1, 3)


def test_a_draw_inside_a_library_names_the_users_line_that_called_it():
    library = draw("random.random", 1, (SITE, 30, "jitter"), (TRAIN, 9, "main"))
    (finding,) = divergent([rank(0, *step()), rank(1, *step(), library)])
    assert "rank 1 drew random.random ×1 at train.py:9;" in finding.message


def test_ranks_started_from_different_checkouts_still_match():
    elsewhere = os.path.join(os.sep, "elsewhere", "checkout", "train.py")
    assert divergent([rank(0, *step()), rank(1, *step(at=elsewhere))]) == []


def test_a_seed_is_compared_by_its_call_not_its_value():
    reseeded = [*step(), seed("random.seed", "3", (TRAIN, 7, "main"))]
    (finding,) = divergent([rank(0, *reseeded), rank(1, *step("4"), draw("random.random", 1, (TRAIN, 7, "main")))])
    assert "rank 0 seeded with random.seed(3) at train.py:7; rank 1 drew random.random ×1 at train.py:7" in (
        finding.message
    )


def test_an_unattributed_move_is_not_compared():
    noticed = moved("random", "moved between #2 and #3", (TRAIN, 6, "main"))
    assert divergent([rank(0, *step()), rank(1, *step()[:2], noticed, step()[2])]) == []


def test_a_block_only_one_rank_ran_is_compared_as_empty_and_named_by_its_block():
    logs = [rank(0, *step()), rank(1, *step()), rank(1, *step(), block=2, pid=101)]
    (finding,) = divergent(logs)
    assert finding.message.startswith(
        "random: the ranks stop drawing alike at their 1st random draw or seed in block 2: "
        "rank 0 made no more (0 random events in all)"
    )
    assert finding.pids == (100, 101) and finding.events == (-1, 0)
    assert [(split.block, split.position) for split in splits(logs)] == [(2, 0)]


def test_a_rank_whose_kept_events_ran_out_where_the_others_drew_on_is_no_telling():
    # Rank 1 kept its first two events (max_events) and counted the rest: what it drew next is unseen.
    later = draw("random.random", 1, (TRAIN, 6, "main"))
    cut = rank(1, *step()[:2], overflow=((later, 1, 1),))
    assert cut.trace.dropped == 1
    assert divergent([rank(0, *step()), cut]) == []
    assert divergent([rank(0, *step()), rank(1, *step()[:2])]) != []  # kept them all: it made no more
