"""The streaming sink's ledger: which micro-batches of a streaming query were decided, by which run.

Owns exactly-once for ``writeStream.format("rocketpy")``. Spark replays a micro-batch when the
driver dies after the sink's commit but before Spark's own commit log records it; the replay has
the same query id (kept in the checkpoint) and batch id, and a new run id (one per start of the
query). The sink keys its work on all three (``stream_job_key``):

* the driver's ``commit(N)`` reads the ledger first; ``N`` already decided means a replay, whose
  rows are dropped (half messages rolled back). Otherwise it records ``N`` for its run and only
  then commits the half messages (or, with plain sends, only records: the rows are visible);
* a task of an already decided micro-batch sends nothing;
* half messages that a dying driver left undecided are decided by the broker's check
  (``JobListener``): committed when the ledger says their run decided their batch, else rolled
  back. A run decides its batches in order from its first, so a run's decisions are one range
  ``[first, last]``: a replay a run dropped lies before its range.

The ledger lives in the NameServers' KV table: namespace ``LEDGER_NAMESPACE``, key = query id,
value = JSON ``{"runs": {run id: [first, last]}}`` for the last ``MAX_RUNS`` runs. It is written to
every NameServer and read from all, ranges merged, so a NameServer that was down at a put does not
bring a batch back. Only the query's one driver writes it. One entry per query that ever wrote
(``mqadmin getKvConfig -s ROCKETPY_SPARK_SINK -k QUERY_ID`` shows one, ``deleteKvConfig`` removes it).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from rocketpy.client.api import MQClientAPI

log = logging.getLogger("rocketpy.spark")

#: NameServer KV namespace of the ledger.
LEDGER_NAMESPACE = "ROCKETPY_SPARK_SINK"
#: Runs remembered per query (restarts are rare; each run's range is two numbers).
MAX_RUNS = 32
#: Separates query id, batch id and run id in a stream's job key (a batch write's key has none).
KEY_SEP = "/"


def stream_job_key(query_id: str, batch_id: int, run_id: str) -> str:
    """The job key of micro-batch ``batch_id`` of query ``query_id`` as executed by run ``run_id``."""
    return KEY_SEP.join((query_id, str(batch_id), run_id))


def parse_job_key(key: str) -> tuple[str, int, str] | None:
    """``(query id, batch id, run id)`` of a stream's job key; None for a batch write's key."""
    parts = key.split(KEY_SEP)
    if len(parts) != 3 or not all(parts) or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1]), parts[2]


@dataclass(frozen=True)
class Decisions:
    """The decided micro-batches of one query: each run's ``(first, last)`` batch id."""

    runs: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def last(self) -> int | None:
        """The highest decided batch id (None: nothing decided yet)."""
        return max((last for _, last in self.runs.values()), default=None)

    def is_replay(self, batch_id: int) -> bool:
        """True when ``batch_id`` was already decided (executing it again is Spark's replay)."""
        last = self.last
        return last is not None and batch_id <= last

    def committed(self, batch_id: int, run_id: str) -> bool:
        """True when run ``run_id`` decided to commit ``batch_id`` (its half messages must be committed)."""
        span = self.runs.get(run_id)
        return span is not None and span[0] <= batch_id <= span[1]

    def with_decision(self, batch_id: int, run_id: str) -> Decisions:
        """These decisions plus ``batch_id`` by ``run_id``, trimmed to the ``MAX_RUNS`` latest runs."""
        first = self.runs.get(run_id, (batch_id, batch_id))[0]
        runs = {**self.runs, run_id: (first, batch_id)}
        keep = sorted(runs, key=lambda r: runs[r][1])[-MAX_RUNS:]
        return Decisions({r: runs[r] for r in keep})

    def merged(self, other: Decisions) -> Decisions:
        """Union of two copies (from two NameServers): each run's widest range."""
        runs = dict(self.runs)
        for run, (first, last) in other.runs.items():
            have = runs.get(run)
            runs[run] = (first, last) if have is None else (min(have[0], first), max(have[1], last))
        return Decisions(runs)

    def to_json(self) -> str:
        return json.dumps({"runs": {r: list(span) for r, span in self.runs.items()}}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Decisions:
        """Parse a stored value; an unreadable one counts as nothing decided (and is logged)."""
        try:
            runs = json.loads(text)["runs"]
            return cls({str(r): (int(span[0]), int(span[1])) for r, span in runs.items()})
        except (ValueError, KeyError, TypeError, IndexError) as e:
            log.error("rocketpy sink ledger: ignoring an unreadable entry %r (%s)", text[:200], e)
            return cls()


async def read_decisions(api: MQClientAPI, query_id: str, timeout_s: float) -> Decisions:
    """The decisions of ``query_id`` merged over every NameServer that answers.

    Raises:
        MQClientError: no NameServer answered (the caller must not guess).
    """
    out = Decisions()
    for text in (await api.get_kv_config(LEDGER_NAMESPACE, query_id, timeout_s)).values():
        if text is not None:
            out = out.merged(Decisions.from_json(text))
    return out


async def write_decisions(api: MQClientAPI, query_id: str, decisions: Decisions, timeout_s: float) -> None:
    """Store ``decisions`` on every NameServer.

    Raises:
        MQClientError / MQBrokerError: no NameServer stored it (the commit must not go on).
    """
    await api.put_kv_config(LEDGER_NAMESPACE, query_id, decisions.to_json(), timeout_s)
