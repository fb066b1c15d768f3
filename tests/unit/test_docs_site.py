"""The documentation site (docs/engineering.md#the-docs-site): MkDocs builds it in strict mode,
every page is in the navigation, and links to the repository's own files are checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mkdocs.config import load_config

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HOOK = DOCS / "hooks" / "source_links.py"


def _build(config: Path, site: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``, from the config's folder, with
    ``env`` over this process's environment (and no repository address unless it names one)."""
    environ = {k: v for k, v in os.environ.items() if k != "LAYBY_REPO_URL"}
    environ |= {"NO_MKDOCS_2_WARNING": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "--site-dir", str(site)],
        cwd=config.parent,
        env=environ,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )


def _nav_files(nav: object) -> list[str]:
    """Every page file a MkDocs ``nav`` names, in order."""
    match nav:
        case str():
            return [nav]
        case list():
            return [f for item in nav for f in _nav_files(item)]
        case dict():
            return [f for value in nav.values() for f in _nav_files(value)]
        case _:
            return []


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The docs site, built once for the tests that read it."""
    site = tmp_path_factory.mktemp("docs") / "site"
    return site, _build(ROOT / "mkdocs.yml", site)


def test_the_docs_site_builds_strict_with_no_broken_link_or_anchor(
    built: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """``mkdocs build --strict`` succeeds: no page outside the navigation, no link to a missing
    page, anchor or repository file, no absolute link (docs/engineering.md#the-docs-site)."""
    site, build = built
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stdout}\n{build.stderr}"
    assert "WARNING" not in build.stderr, build.stderr
    api = (site / "doors" / "api" / "index.html").read_text(encoding="utf-8")
    assert 'id="post-apiasks"' in api  # the OpenAPI document, rendered
    assert 'id="schema-askrequest"' in api


# ``docs/<page>.md`` or ``docs/<page>.md#<anchor>`` as the code, the tests and the manifests cite
# a page of the docs (docstrings, comments, error messages).
DOCS_REFERENCE = re.compile(r"\bdocs/((?:[\w-]+/)*[\w.-]+?\.md)(?:#([\w-]+))?")
CITING = (
    *("contracts", "libs", "services", "tests", "deploy", "k8s", "bench", "examples", "clients"),
    *("README.md", "CHANGELOG.md", "compose.yaml", "Taskfile.yml", "pyproject.toml", "Dockerfile"),
)
CITING_SUFFIXES = {".py", ".ts", ".mjs", ".yaml", ".yml", ".toml", ".json", ".sql", ".html", ".js", ".md"}
SKIPPED_DIRS = {"node_modules", "dist", ".compare", ".node", "__pycache__"}


def _citations() -> dict[tuple[str, str | None], list[str]]:
    """Every ``docs/…md[#anchor]`` the repository's code, tests and manifests cite, by where."""
    found: dict[tuple[str, str | None], list[str]] = {}
    for top in CITING:
        for path in [ROOT / top] if (ROOT / top).is_file() else sorted((ROOT / top).rglob("*")):
            named = path == ROOT / top
            if not named and (path.suffix not in CITING_SUFFIXES or SKIPPED_DIRS & set(path.parts)):
                continue
            if not path.is_file():
                continue
            if path.name == "openapi.ts":
                continue  # generated from contracts/schema/openapi.json, which is checked here
            text = path.read_text(encoding="utf-8", errors="replace")
            for match in DOCS_REFERENCE.finditer(text):
                where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
                found.setdefault((match[1], match[2]), []).append(where)
    return found


def test_every_docs_page_and_anchor_the_code_cites_exists(
    built: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """A ``docs/<page>.md#<anchor>`` in a docstring, a comment, an error message or a test names
    a page of the site and a heading of it, so a reader who follows it lands where it says
    (docs/engineering.md#the-docs-site)."""
    site, build = built
    assert build.returncode == 0, build.stderr
    citations = _citations()
    assert len(citations) > 200, "the scan finds the code's citations"
    broken = []
    for (page, anchor), where in sorted(citations.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        html = site / page.removesuffix(".md") / "index.html"
        if page == "index.md":
            html = site / "index.html"
        if not (DOCS / page).exists():
            broken.append(f"docs/{page} (no such page), cited at {', '.join(where)}")
        elif anchor is not None and f'id="{anchor}"' not in html.read_text(encoding="utf-8"):
            broken.append(f"docs/{page}#{anchor} (no such heading), cited at {', '.join(where)}")
    assert broken == [], "\n".join(broken)


def test_every_page_in_docs_is_in_the_navigation_or_left_out_on_purpose() -> None:
    """Each Markdown file under docs/ is a page of the navigation of mkdocs.yml, unless
    ``exclude_docs`` or ``not_in_nav`` leaves it out, and every decision record is listed in
    docs/decisions/index.md (docs/engineering.md#the-docs-site)."""
    config = load_config(str(ROOT / "mkdocs.yml"))
    left_out = [spec for spec in (config.exclude_docs, config.not_in_nav) if spec is not None]
    pages = {
        path.relative_to(DOCS).as_posix()
        for path in DOCS.rglob("*.md")
        if not any(spec.match_file(path.relative_to(DOCS).as_posix()) for spec in left_out)
    }
    in_nav = _nav_files(config.nav)
    assert sorted(pages - set(in_nav)) == [], "add these pages to nav: in mkdocs.yml"
    assert sorted({page for page in in_nav if in_nav.count(page) > 1}) == []
    records = {p.name for p in (DOCS / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md")}
    listed = set(re.findall(r"\]\(([^)#]+\.md)\)", (DOCS / "decisions" / "index.md").read_text("utf-8")))
    assert sorted(records - listed) == [], "add these records to docs/decisions/index.md"


@pytest.fixture
def small_site(tmp_path: Path) -> Path:
    """A repository of one page, built with the docs site's hook: the page links to a file
    outside docs/ that exists (with an anchor), and to a folder."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "compose.yaml").write_text("services: {}\n", encoding="utf-8")
    (tmp_path / "k8s").mkdir()
    (tmp_path / "docs" / "index.md").write_text(
        "# Home\n\nThe [compose file](../compose.yaml#L1), [compose.yaml](../compose.yaml), [k8s/](../k8s/).\n",
        encoding="utf-8",
    )
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        "site_name: t\ndocs_dir: docs\nrepo_url: !ENV [LAYBY_REPO_URL, null]\n"
        f"hooks:\n  - {HOOK}\nvalidation:\n  links:\n    not_found: warn\n",
        encoding="utf-8",
    )
    return config


def test_a_link_to_a_missing_repository_file_fails_the_build_naming_page_and_link(
    small_site: Path, tmp_path: Path
) -> None:
    """A link from a page to a file outside docs/ that does not exist fails the build, and the
    message names the page and the link (docs/engineering.md#the-docs-site)."""
    page = small_site.parent / "docs" / "index.md"
    page.write_text(
        page.read_text(encoding="utf-8") + "\nSee [the code](../libs/gone.py).\n", encoding="utf-8"
    )
    build = _build(small_site, tmp_path / "site")
    assert build.returncode != 0
    assert (
        "Doc file 'index.md' contains a link '../libs/gone.py' that names 'libs/gone.py', "
        "which does not exist in the repository"
    ) in build.stderr


def test_a_repository_link_shows_the_path_without_an_address_and_links_the_host_with_one(
    small_site: Path, tmp_path: Path
) -> None:
    """With no repository address a link to a repository file becomes its path as code; with
    ``LAYBY_REPO_URL`` it points at ``{repo_url}/blob/main/{path}`` (docs/engineering.md#the-docs-site)."""
    plain = _build(small_site, tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr
    html = (tmp_path / "plain" / "index.html").read_text(encoding="utf-8")
    assert "The <span>compose file (<code>compose.yaml</code>)</span>, <code>compose.yaml</code>" in html
    assert "<code>k8s/</code>" in html
    assert "../compose.yaml" not in html

    linked = _build(small_site, tmp_path / "linked", LAYBY_REPO_URL="https://git.example/layby/")
    assert linked.returncode == 0, linked.stderr
    html = (tmp_path / "linked" / "index.html").read_text(encoding="utf-8")
    assert 'href="https://git.example/layby/blob/main/compose.yaml#L1">compose file</a>' in html
    assert 'href="https://git.example/layby/blob/main/k8s">k8s/</a>' in html
