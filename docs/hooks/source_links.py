"""MkDocs hook: links from a page to the repository's own files outside ``docs/``.

The pages link to the code, the tests and the manifests they describe (``../libs/...py``,
``../compose.yaml``, ``../k8s/``), and to files of ``docs/`` that are not pages (``exclude_docs``).
MkDocs knows only the site's files, so it would call every such link broken. This hook takes them
over before MkDocs checks links: each target must exist in the repository (a missing one is an
error naming the page and the link, and the build fails; so is a link that leaves the
repository), and the link becomes ``{repo_url}/blob/main/{path}`` when ``repo_url`` is
configured (``LAYBY_REPO_URL``), or the path shown as inline code otherwise. Links between pages
are left to MkDocs' own validation (``validation:`` in ``mkdocs.yml``).
"""

from __future__ import annotations

import logging
import posixpath
import xml.etree.ElementTree as etree
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from markdown import Markdown
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.source_links")

# After Python-Markdown's inline processor (20), which makes the links, and before MkDocs' own
# link check (`relpath`, 0), which would report these as missing documentation files.
_PRIORITY = 10


class _State:
    """What the tree processor needs of the build: set in ``on_config`` and ``on_page_markdown``
    (MkDocs renders one page at a time, right after its ``on_page_markdown``)."""

    def __init__(self) -> None:
        self.root = Path()
        self.docs = Path()
        self.repo_url: str | None = None
        self.excluded: Callable[[str], bool] = lambda _path: False
        self.page: str | None = None
        self.broken = 0


_state = _State()


def _source_path(page: str, href: str) -> tuple[str, str] | None:
    """The repository path ``href`` (a link on the page ``page``, relative to ``docs/``) points
    at when it leaves ``docs/`` or names a file of ``docs/`` that is not part of the site
    (``exclude_docs``), and its fragment; None for a link MkDocs handles (another page, an image,
    an anchor, a URL)."""
    scheme, netloc, path, _query, fragment = urlsplit(href)
    if scheme or netloc or not path or path.startswith("/"):
        return None
    docs = _state.docs.relative_to(_state.root).as_posix()
    target = posixpath.normpath(posixpath.join(docs, posixpath.dirname(page), unquote(path)))
    inside = target.removeprefix(f"{docs}/") if target.startswith(f"{docs}/") else None
    if target == docs or (inside is not None and not _excluded(inside)):
        return None
    return target, fragment


def _excluded(path: str) -> bool:
    """Whether the file ``path`` of ``docs/`` is left out of the site (``exclude_docs``)."""
    return _state.excluded(path)


def _replace(element: etree.Element, path: str, fragment: str, *, folder: bool) -> None:
    """Turn the link ``element`` to the repository file or folder ``path`` into a link to it on
    the repository's host, or, with no host configured, into its text followed by the path as
    code (just the code when the link's text is the path already)."""
    if _state.repo_url is not None:
        anchor = f"#{fragment}" if fragment else ""
        element.set("href", f"{_state.repo_url.rstrip('/')}/blob/main/{path}{anchor}")
        return
    shown = f"{path}/" if folder else path
    text = "".join(element.itertext()).strip().rstrip("/")
    element.attrib.clear()
    if not text or text in (path, path.rsplit("/", 1)[-1]):
        element.tag = "code"
        element.text = shown
        for child in list(element):
            element.remove(child)
        return
    element.tag = "span"
    code = etree.SubElement(element, "code")
    code.text = shown
    code.tail = ")"
    previous = element[-2] if len(element) > 1 else None
    if previous is not None:
        previous.tail = f"{previous.tail or ''} ("
    else:
        element.text = f"{element.text or ''} ("


class _SourceLinks(Treeprocessor):
    """Checks and rewrites every link of a page that points into the repository outside docs/."""

    def run(self, root: etree.Element) -> None:
        page = _state.page
        if page is None:
            return
        for element in root.iter("a"):
            href = element.get("href")
            if href is None:
                continue
            source = _source_path(page, href)
            if source is None:
                continue
            path, fragment = source
            target = (_state.root / path).resolve()
            if not target.is_relative_to(_state.root):
                problem = "leaves the repository"
            elif not target.exists():
                problem = f"names '{path}', which does not exist in the repository"
            else:
                _replace(element, path, fragment, folder=target.is_dir())
                continue
            _state.broken += 1
            log.error("Doc file '%s' contains a link '%s' that %s", page, href, problem)
            _replace(element, path, fragment, folder=False)  # reported once, here, not by MkDocs too


class _SourceLinksExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:
        md.treeprocessors.register(_SourceLinks(md), "layby_source_links", _PRIORITY)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Record where the repository and docs/ are, and add the link processor to every page's
    Markdown."""
    _state.docs = Path(config.docs_dir).resolve()
    _state.root = Path(config.config_file_path).resolve().parent
    _state.repo_url = config.repo_url or None
    spec = config.exclude_docs
    _state.excluded = spec.match_file if spec is not None else lambda _path: False
    _state.broken = 0
    config.markdown_extensions.append(_SourceLinksExtension())
    return config


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Note the page about to be rendered, whose links the processor resolves."""
    _state.page = page.file.src_uri
    return markdown


def on_page_content(html: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """The page is rendered: no Markdown converted from here on is this page's."""
    _state.page = None
    return html


def on_post_build(*, config: MkDocsConfig) -> None:
    """Fail the build when any page links to a repository file that does not exist."""
    if _state.broken:
        count, _state.broken = _state.broken, 0
        raise PluginError(f"{count} link(s) to repository files that do not exist (listed above)")
