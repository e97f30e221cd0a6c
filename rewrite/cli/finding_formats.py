"""How ``--check`` writes a finding in the formats other than its own: ruff's JSON, and GitHub workflow annotations."""

from __future__ import annotations

from warp_rewrite.cli.lint import Finding, rule_url


def _github_escape(text: str, property_value: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def json_finding(finding: Finding) -> dict:
    """A finding as ruff's ``--output-format json`` writes one."""
    return {
        "cell": None,
        "code": finding.code,
        "end_location": {"column": finding.end_column, "row": finding.end_row},
        "filename": str(finding.path.resolve()),
        "fix": None,
        "location": {"column": finding.column, "row": finding.row},
        "message": finding.message,
        "noqa_row": finding.row,
        "url": rule_url(finding.code),
    }


def github_line(finding: Finding) -> str:
    properties = {
        "file": str(finding.path.resolve()),
        "line": finding.row,
        "col": finding.column,
        "endLine": finding.end_row,
        "endColumn": finding.end_column,
        "title": f"wp-rewrite ({finding.code})",
    }
    listed = ",".join(f"{key}={_github_escape(str(value), True)}" for key, value in properties.items())
    return f"::error {listed}::{_github_escape(str(finding))}"
