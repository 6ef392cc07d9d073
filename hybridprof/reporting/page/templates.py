"""The self-contained HTML report: one file, CSS and JS inlined, data as JSON, no network.

Templates are read from the package `hybridprof._templates` through `importlib.resources`, so an
editable install and a wheel find them the same way. Autoescape is on for every template and
undefined names fail loudly (`StrictUndefined`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from dataclasses import dataclass
from importlib import resources

import jinja2
from markupsafe import Markup, escape

from hybridprof.datamodel import ProfileSession
from hybridprof.errors import ReportDependencyError
from hybridprof.reporting.page.context import ReportContext, build_context
from hybridprof.reporting.page.tree_table import cell_text, pdf_parts, table_data

TEMPLATE_PACKAGE = "hybridprof._templates"
REPORT_TEMPLATE = "report.html.j2"


def _read_template(name: str) -> str:
    try:
        return resources.files(TEMPLATE_PACKAGE).joinpath(name).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        # Running from a bare checkout (not installed) or a wheel built without package data.
        raise ReportDependencyError(
            f"report template '{name}' not found in package {TEMPLATE_PACKAGE}; "
            "install hybridprof (pip install -e .) so its templates are found"
        ) from exc


def read_template(name: str) -> str:
    """One of the reports' own files (a template, a stylesheet, a script) as text."""
    return _read_template(name)


@functools.cache
def template_env() -> jinja2.Environment:
    """The one jinja2 Environment of the reports (autoescape on, StrictUndefined)."""
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_read_template),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["dotted"] = breakable_at_dots
    env.filters["op_name"] = breakable_op_name
    env.filters["file_path"] = breakable_file_path
    return env


def breakable_op_name(name: object) -> Markup:
    """An op name that may wrap after `::`, `_` or `.` (`aten::_scaled_dot_product_flash_...`):
    a long one fits a narrow column of the PDF without cutting a word of it."""
    text = str(escape(str(name)))
    for mark in ("::", "_", "."):
        text = text.replace(mark, mark + "<wbr>")
    return Markup(text)


def breakable_file_path(path: object) -> Markup:
    """A file path that may wrap after each `/` (the header's model file)."""
    return Markup(str(escape(str(path))).replace("/", "/<wbr>"))


def breakable_at_dots(path: object) -> Markup:
    """A module path that may wrap after each dot and nowhere else (`blocks.1.attn.qkv`, never
    `bloc/ks.1`): escaped, with a word-break opportunity after every dot."""
    return Markup(str(escape(str(path))).replace(".", ".<wbr>"))


@dataclass(frozen=True, slots=True)
class Assets:
    """Our own static files, inlined verbatim (they are ours, not user data, hence Markup)."""

    css: Markup
    print_css: Markup
    js: Markup
    js_hash: str  # the CSP source that allows exactly this inline script and no other


@functools.cache
def assets() -> Assets:
    # One inline script (the CSP allows it by its hash): the icicle chart's function, then the
    # table's script, which parses the page's data once and hands it to the chart.
    js = _read_template("icicle.js") + "\n" + _read_template("report.js")
    return Assets(
        css=Markup(_read_template("report.css")),
        print_css=Markup(_read_template("print.css")),
        js=Markup(js),
        js_hash=script_hash(js),
    )


def script_hash(script: str) -> str:
    """CSP's `'sha256-...'` of an inline script's exact text."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


# What would end or confuse a <script> element's text (`</script>`, `<!--`), or end a line in older
# JavaScript parsers, written as JSON escapes: the text still parses to the same data.
SCRIPT_UNSAFE = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def script_json(data: object) -> Markup:
    """`data` as JSON that is safe as the text of a `<script type="application/json">` element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, written in SCRIPT_UNSAFE:
        text = text.replace(char, written)
    return Markup(text)


def render_page(ctx: ReportContext) -> str:
    """Render the report template for a context built in "html" or "pdf" mode.

    In "html" mode the layer table's rows and the source locations travel as data and the page
    draws them (see report.js); the op breakdowns are a second data block, read on the first
    click. In "pdf" mode the template renders its (limited) rows.
    """
    template = template_env().get_template(REPORT_TEMPLATE)
    page_data = ops_data = Markup("")
    if ctx.mode == "html":
        page_data = script_json(
            {
                "device": ctx.has_device,
                "memory": ctx.has_memory,
                "table": table_data(ctx.columns, ctx.rows),
                "icicle": [chart.data() for chart in ctx.icicles],
                "sources": [
                    [s.path or "(root)", s.class_name, s.where, s.aliases] for s in ctx.sources
                ],
            }
        )
        ops_data = script_json(ctx.data.get("ops", {}))
    columns = ctx.columns
    return template.render(
        ctx=ctx,
        assets=assets(),
        columns=columns,
        parts=pdf_parts(columns, ctx.rows) if ctx.mode == "pdf" else [columns],
        cell_text=cell_text,
        page_data=page_data,
        ops_data=ops_data,
    )


def render_html(session: ProfileSession) -> str:
    """The self-contained HTML report: one file, CSS and JS inlined, data as JSON, no network."""
    return render_page(build_context(session, "html"))


class HtmlRenderer:
    extensions = (".html", ".htm")
    binary = False

    def render(self, session: ProfileSession) -> str:
        return render_html(session)
