"""What is damaged in a run directory (:func:`diagnose`), and truncating it back to what is intact (:func:`repair`).

``coevo doctor RUN`` prints a :class:`Diagnosis`; ``coevo doctor RUN --repair``
calls :func:`repair`. The checks are :meth:`GameLog.damage` with checksums, on
every committed generation: its manifest, its parts (size, rows, sha256) and
its checkpoint files (size, sha256). Besides damage, a diagnosis lists the
lock (live or stale) and the *orphans*: files under ``log/`` or
``checkpoints/`` that no committed manifest names (a generation that was being
written when its driver died, a manifest after a gap, a ``.partial`` file).
Orphans are harmless (nothing reads them), but they are said, and removed by a
repair.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from coevo.arena.errors import LogError
from coevo.arena.gamelog.lock import LockInfo, RunLock, read_lock
from coevo.arena.gamelog.log import PRUNED, GameLog, committed_files
from coevo.arena.gamelog.rundir import RunDir

__all__ = ["Diagnosis", "diagnose", "repair"]

_GEN = re.compile(r"gen=(\d+)")


@dataclass
class Diagnosis:
    """What :func:`diagnose` found in a run directory.

    Attributes:
        run: the run directory's URI.
        committed: generations with a manifest, contiguous from 0 (damaged or not).
        intact: generations before the first damaged one (what a repair keeps).
        damage: for each damaged generation, what is wrong (its manifest, parts, checkpoint files).
        unverified: generations whose manifest records no checksums (written before coevo did).
        pruned: generations whose checkpoint was removed (``run.keep_checkpoints``): their
            log is intact, but a run cannot resume from them.
        orphans: files, relative to the run, that no committed manifest names.
        lock: the lock as found (None: unlocked).
        lock_stale: why that lock may be taken over (None: unlocked, or its holder may be running).
    """

    run: str
    committed: int = 0
    intact: int = 0
    damage: dict[int, list[str]] = field(default_factory=dict)
    unverified: list[int] = field(default_factory=list)
    pruned: list[int] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    lock: LockInfo | None = None
    lock_stale: str | None = None

    @property
    def damaged(self) -> bool:
        """Whether any committed generation is damaged."""
        return bool(self.damage)

    def lines(self) -> list[str]:
        """The diagnosis, as lines for a terminal."""
        out = [
            f"{self.run}: {self.committed} committed generation{'s' * (self.committed != 1)}, "
            f"{self.intact} intact"
        ]
        for gen, problems in self.damage.items():
            out += [f"  generation {gen}: {problem}" for problem in problems]
        if self.unverified:
            out.append(
                f"  generations {_span(self.unverified)} record no checksums (written before "
                "coevo recorded them): checked for missing files and row counts only"
            )
        if self.pruned:
            out.append(
                f"  generations {_span(self.pruned)} keep no checkpoint (run.keep_checkpoints): "
                "their log is intact; a run resumes from a later one"
            )
        if self.orphans:
            out.append(f"  {len(self.orphans)} orphan files (no committed manifest names them):")
            out += [f"    {path}" for path in self.orphans]
        if self.lock is not None:
            state = f"stale: {self.lock_stale}" if self.lock_stale else "its holder may be running"
            out.append(f"  locked by {self.lock.describe()}; {state}")
        if self.damaged and self.intact - 1 in self.pruned:
            out.append(
                f"damaged: `coevo doctor {self.run} --repair` truncates the run back to generation "
                f"{self.intact - 1}, whose checkpoint was pruned: its log reads whole, but it "
                "cannot be resumed (start a new run to train on)"
            )
        elif self.damaged:
            back = f"generation {self.intact - 1}" if self.intact else "no generation"
            out.append(
                f"damaged: `coevo doctor {self.run} --repair` truncates the run back to {back}, "
                f"and `coevo resume {self.run}` plays the rest again"
            )
        elif self.orphans or self.lock_stale:
            out.append(f"intact; `coevo doctor {self.run} --repair` tidies up the rest")
        else:
            out.append("intact")
        return out


def _span(gens: list[int]) -> str:
    return f"{gens[0]}–{gens[-1]}" if len(gens) > 1 else str(gens[0])


def diagnose(run: RunDir | str) -> Diagnosis:
    """Check every committed generation of ``run`` (with checksums), its lock and its orphan files.

    Raises:
        LogError: ``run`` holds no run, or was written by a coevo whose log schema this one does not read.
    """
    run = run if isinstance(run, RunDir) else RunDir(run)
    if not run.exists("experiment.json") and not run.exists("log"):
        raise LogError(f"{run.uri} holds no run (no experiment.json, no log)")
    log = GameLog(run)
    found = Diagnosis(run.uri)
    named: set[str] = set()
    folders: list[str] = []  # checkpoint folders of manifests that do not list their files
    for gen, name in enumerate(log.manifest_names()):
        if name != f"gen={gen:06d}.json":
            break  # a gap: this manifest and those after it are orphans
        named.add(f"log/_manifests/{name}")
        manifest, problem = log.read_manifest(gen)
        found.committed = gen + 1
        if problem is not None:
            found.damage[gen] = [problem]
            continue
        named.update(committed_files(manifest))
        if log.pruned(manifest):
            found.pruned.append(gen)
            named.add(f"{manifest['checkpoint']}/{PRUNED}")
        if "checkpoint_files" not in manifest and manifest.get("checkpoint"):
            folders.append(manifest["checkpoint"] + "/")
        if "files" not in manifest:
            found.unverified.append(gen)
        problems = log.damage(manifest, checksum=True)
        if problems:
            found.damage[gen] = problems
    found.intact = min(found.damage, default=found.committed)
    found.orphans = [
        path
        for path in [*run.walk("log"), *run.walk("checkpoints")]
        if path not in named and not any(path.startswith(folder) for folder in folders)
    ]
    found.lock = read_lock(run)
    found.lock_stale = found.lock.stale_because() if found.lock is not None else None
    return found


def repair(run: RunDir | str) -> tuple[Diagnosis, list[str]]:
    """Truncate ``run`` back to its last intact generation, remove its orphans and clear a stale lock.

    Holds the run's lock while it works (taking a stale one over). Later
    generations go highest first, manifests before their files, so a repair
    cut short leaves a log that still reads (and a second repair finishes it).

    Returns:
        the diagnosis the repair acted on, and what it did (one line per action).

    Raises:
        LogError: another run holds the lock (naming its host and pid), or ``run`` holds no run.
    """
    run = run if isinstance(run, RunDir) else RunDir(run)
    before = diagnose(run)
    done: list[str] = []
    with RunLock(run) as lock:
        found = diagnose(run)  # again, under the lock: nothing changes it now
        found.lock, found.lock_stale = before.lock, before.lock_stale
        if lock.taken_over:
            done.append(f"cleared the stale lock: {lock.taken_over}")
        keep = found.intact
        for gen in range(found.committed - 1, keep - 1, -1):
            run.delete("log", "_manifests", f"gen={gen:06d}.json")
        removed = [folder for folder, gen in _generation_folders(run) if gen >= keep]
        for folder in removed:
            run.delete(folder)
        if found.committed > keep:
            back = f"generation {keep - 1}" if keep else "no generation"
            done.append(
                f"removed generations {_span(list(range(keep, found.committed)))} (manifests, "
                f"parts, checkpoints): the run now ends at {back}"
            )
        for path in found.orphans:  # those in a removed folder are gone already
            run.delete(path)
        if found.orphans:
            done.append(f"removed {len(found.orphans)} orphan files")
    return found, done


def _generation_folders(run: RunDir) -> list[tuple[str, int]]:
    """Every ``gen=<n>`` folder of every table and of the checkpoints (relative to the run), with ``n``."""
    tables = [("log", name) for name in run.listdir("log") if name != "_manifests"]
    return [
        ("/".join([*parent, name]), int(match.group(1)))
        for parent in [*tables, ("checkpoints",)]
        for name in run.listdir(*parent)
        if (match := _GEN.fullmatch(name))
    ]
