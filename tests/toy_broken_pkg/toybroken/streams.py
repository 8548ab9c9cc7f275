"""What toybroken's entry points name: a stream named as rngtrace's own, and something that is no Stream."""

from __future__ import annotations

from rngtrace.sources import Stream

#: named like rngtrace's own stream of Python's random module: skipped, never put in its place
SHADOW = Stream(name="random", module="toybroken", source="toybroken.streams:Nothing")

NOT_A_STREAM = "toybroken's stream"
