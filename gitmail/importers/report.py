"""What an import did: counts per kind of record, and every problem with a count and examples.

An import never stops at a bad row: each one it cannot bring over is
counted under a stable problem key (``archive_file_missing``,
``invalid_record``, ...) with a few examples that name the row, and the rest
goes on. The report is what the CLI prints as a table or as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_EXAMPLES = 5

# The kinds of records counted, in the order a report lists them.
KINDS = ("projects", "agents", "tokens", "messages", "receipts", "attachments", "contacts", "reservations",
         "products", "windows", "summaries")

# Problems, by stable key, and what each means for the reader of a report.
PROBLEMS = {
    "table_not_imported": "tables this importer does not know, left out",
    "column_not_imported": "columns this importer does not know, left out",
    "table_unusable": "tables lacking a column the import needs, left out",
    "project_key_invalid": "projects whose human_key is not an absolute path, left out with their records",
    "agent_name_not_allowed": "agents whose name gitmail does not allow, left out with the mail they sent and "
                              "their copies of the mail they received",
    "agent_name_taken": "agents whose name another agent of the gitmail project holds (kept as it was)",
    "unreadable_timestamp": "rows whose time could not be read, left out",
    "invalid_record": "rows that break a rule of gitmail's records, left out",
    "value_dropped": "values gitmail cannot keep (an invalid topic or policy), left out of an imported record",
    "archive_file_missing": "messages whose file is not in the archive folder (imported from the database)",
    "archive_not_found": "projects with no folder in the archive given",
    "attachment_unreadable": "attachments whose bytes could not be read, left out of their message",
    "dangling_reference": "rows naming an agent, message or project the database does not hold, left out",
}


# Problems that lose no row: what the source holds that the import has no place for (noted, not failed on).
NOTES = frozenset({"table_not_imported", "column_not_imported"})


@dataclass
class Problem:
    """One kind of problem: how often it happened and a few examples."""

    key: str
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "meaning": PROBLEMS[self.key], "count": self.count, "examples": list(self.examples)}


@dataclass
class Counts:
    """Records of one kind: written now, found already in the archive, left out."""

    imported: int = 0
    present: int = 0
    skipped: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"imported": self.imported, "present": self.present, "skipped": self.skipped}


@dataclass
class ProjectReport:
    """One project of the source, and what became of its records."""

    human_key: str
    slug: str
    counts: dict[str, Counts] = field(default_factory=lambda: {kind: Counts() for kind in KINDS})
    commits: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"human_key": self.human_key, "slug": self.slug, "commits": self.commits,
                "counts": {kind: value.to_dict() for kind, value in self.counts.items()}}


@dataclass
class ImportReport:
    """The whole import: its source, each project, the problems, and how long it took."""

    source: str
    database: str
    archive: str | None
    dry_run: bool
    projects: list[ProjectReport] = field(default_factory=list)
    problems: dict[str, Problem] = field(default_factory=dict)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    _seen: set[tuple[str, str]] = field(default_factory=set, repr=False)

    def problem(self, key: str, example: str) -> None:
        """Count one occurrence of ``key`` named by ``example`` (once, however often it is met), keeping a few."""
        if key not in PROBLEMS:
            raise KeyError(f"unknown problem key {key!r}")
        if (key, example) in self._seen:
            return  # the same row met again (a message kept in two projects' archives)
        self._seen.add((key, example))
        found = self.problems.setdefault(key, Problem(key))
        found.count += 1
        if len(found.examples) < MAX_EXAMPLES:
            found.examples.append(example)

    def lost_rows(self) -> bool:
        """Whether rows were left out or brought in incomplete (a problem beyond the notes)."""
        return any(key not in NOTES for key in self.problems)

    def totals(self) -> dict[str, Counts]:
        out = {kind: Counts() for kind in KINDS}
        for project in self.projects:
            for kind, value in project.counts.items():
                out[kind].imported += value.imported
                out[kind].present += value.present
                out[kind].skipped += value.skipped
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "database": self.database, "archive": self.archive, "dry_run": self.dry_run,
            "projects": [project.to_dict() for project in self.projects],
            "totals": {kind: value.to_dict() for kind, value in self.totals().items()},
            "problems": [problem.to_dict() for problem in self.problems.values()],
            "seconds": round(self.seconds, 3), "cpu_seconds": round(self.cpu_seconds, 3),
        }
