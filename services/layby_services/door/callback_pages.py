"""The HTML pages behind a callback link (docs/doors/callback.md#the-pages-behind-a-link).

Three pages are byte-constant: they interpolate nothing at all, so a ticket, a query string or a
path can never be reflected into them. The form page is rendered from the question's stored
schema only (the author's text, HTML-escaped), never from the request; its one inline script is
a constant that collects the fields and POSTs ``{"answer": {...}}`` back to the same URL. The
review page likewise shows the stored proposal only, and its constant script posts the decision.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from layby_contracts.errors import BadInput
from layby_contracts.events import InteractionAsked
from layby_domain.formats.form import check_form_subset, effective_schema
from layby_domain.formats.review import arguments_sha256

PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'"
"""Every constant page's Content-Security-Policy: no script at all."""
FORM_PAGE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "connect-src 'self'; form-action 'self'"
)
"""The form page's: what its one inline script needs, and nothing else."""
_HEAD = (
    "<!doctype html><html lang=en><meta charset=utf-8>"
    "<meta name=viewport content='width=device-width, initial-scale=1'>"
)
_STYLE = (
    "<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;"
    "line-height:1.4}label{display:block;margin:.8rem 0 .2rem;font-weight:600}"
    "input:not([type=checkbox]),select{width:100%;box-sizing:border-box;padding:.4rem;font:inherit}"
    "fieldset{border:1px solid #ccc;margin:1rem 0}small{display:block;color:#555}"
    "button{margin-top:1rem;padding:.5rem 1.2rem;font:inherit}#s{font-weight:600}</style>"
)

DONE_PAGE = (
    f"{_HEAD}<title>Done</title>{_STYLE}<h1>Done</h1>"
    "<p>This interaction has already been answered.</p></html>"
).encode()
CONFIRM_PAGE = (
    f"{_HEAD}<title>Confirm</title>{_STYLE}<h1>Confirm</h1><p>Press the button to confirm.</p>"
    "<form method=post><button type=submit>Confirm</button></form></html>"
).encode()
AWAITING_PAGE = (
    f"{_HEAD}<title>Awaiting your reply</title>{_STYLE}<h1>Awaiting your reply</h1>"
    "<p>Please answer in the conversation where you received this question.</p></html>"
).encode()

# Constant. Collects every [data-kind] control, coerces numbers and booleans, omits empty
# optional fields (the browser enforces `required` before submit), and POSTs to this same URL.
# It reaches the form only through document-level methods: a form's own members can be shadowed
# by controls named after them (a property called "addEventListener" or "hidden").
FORM_SCRIPT = (
    "const w=document.getElementById('w'),s=document.getElementById('s'),"
    "b=document.querySelector('#f button');"
    "document.addEventListener('submit',async e=>{e.preventDefault();const a={};"
    "for(const el of document.querySelectorAll('#f [data-kind]')){const k=el.dataset.kind;"
    "if(k==='boolean'){a[el.name]=el.checked;continue}"
    "if(el.value===''){continue}"
    "a[el.name]=(k==='integer'||k==='number')?Number(el.value):el.value}"
    "b.disabled=true;s.textContent='Sending\\u2026';"
    "try{const r=await fetch(location.href,{method:'POST',headers:{'Content-Type':'application/json'},"
    "body:JSON.stringify({answer:a})});let j={};try{j=await r.json()}catch(x){}"
    "if(r.ok){w.hidden=true;s.textContent='Done'}"
    "else{s.textContent=(j&&typeof j.error==='string')?j.error:('Error '+r.status);b.disabled=false}}"
    "catch(x){s.textContent='Could not send the answer; please try again.';b.disabled=false}});"
)


class Unrenderable(Exception):
    """The stored schema is outside the renderable subset (docs/doors/callback.md#unrenderable-schema): a
    500, never half a page."""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


@dataclass(frozen=True, slots=True)
class _Field:
    """One property of the schema as its control is rendered."""

    ident: str  # the control's id: its position in the schema, whatever page it is on
    name: str
    prop: dict[str, Any]
    required: bool
    value: object  # the ``data.values`` prefill, else the schema's default
    payload: dict[str, Any]

    @property
    def title(self) -> str:
        return _esc(self.prop.get("title") or self.name)

    @property
    def label(self) -> str:
        return f"<label for={self.ident}>{self.title}</label>"

    @property
    def hint(self) -> str:
        description = self.prop.get("description")
        return f"<small>{_esc(description)}</small>" if isinstance(description, str) else ""

    @property
    def attrs(self) -> str:
        return f'id={self.ident} name="{_esc(self.name)}"'

    @property
    def req(self) -> str:
        return " required" if self.required else ""

    @property
    def shown(self) -> str:
        """The prefill as a text or number input's value; a boolean or no value shows nothing."""
        return "" if self.value is None or isinstance(self.value, bool) else f' value="{_esc(self.value)}"'


def _checkbox(field: _Field) -> str:
    """Inside its label, and never ``required``: unchecked is an answer (false)."""
    checked = " checked" if field.value is True else ""
    box = f"<input type=checkbox {field.attrs} data-kind=boolean{checked}>"
    return f"<label for={field.ident}>{box} {field.title}</label>{field.hint}"


def _text(field: _Field) -> str:
    if "enum" in field.prop:
        return _select(field)
    return (
        f"{field.label}{field.hint}<input type=text {field.attrs} data-kind=string{field.req}{field.shown}>"
    )


def _select(field: _Field) -> str:
    """The per-send ``data.options`` (with their labels), else the enum; a blank first choice."""
    labelled = ((field.payload.get("data") or {}).get("options") or {}).get(field.name)
    choices = (
        [(c["value"], c.get("label") or c["value"]) for c in labelled]
        if labelled
        else [(v, v) for v in field.prop["enum"]]
    )
    opts = "".join(
        f'<option value="{_esc(v)}"{" selected" if v == field.value else ""}>{_esc(text)}</option>'
        for v, text in choices
    )
    blank = '<option value="">\u2014</option>'
    return (
        f"{field.label}{field.hint}<select {field.attrs} data-kind=string{field.req}>{blank}{opts}</select>"
    )


def _number(field: _Field, *, step: str) -> str:
    kind = field.prop["type"]
    return (
        f"{field.label}{field.hint}"
        f"<input type=number step={step} {field.attrs} data-kind={kind}{field.req}{field.shown}>"
    )


# One renderer per scalar type of the channel form subset (check_form_subset admits no other).
_CONTROLS: dict[str, Callable[[_Field], str]] = {
    "boolean": _checkbox,
    "string": _text,
    "integer": partial(_number, step="1"),
    "number": partial(_number, step="any"),
}


def _control(index: int, name: str, prop: dict[str, Any], required: bool, payload: dict[str, Any]) -> str:
    values = (payload.get("data") or {}).get("values") or {}
    field = _Field(
        ident=f"f{index}",
        name=name,
        prop=prop,
        required=required,
        value=values.get(name, prop.get("default")),
        payload=payload,
    )
    return _CONTROLS[prop["type"]](field)


def form_page(asked: InteractionAsked) -> bytes:
    """The schema-rendered form of a channel ``form`` question (docs/doors/callback.md#form-page)."""
    payload = asked.format_payload or {}
    schema = effective_schema(payload)
    try:
        check_form_subset(schema)
    except BadInput as exc:
        raise Unrenderable(exc.message) from None
    props: dict[str, Any] = schema["properties"]
    required = set(schema.get("required") or [])
    order = {name: i for i, name in enumerate(props)}
    pages = payload.get("pages") or [{"title": None, "fields": list(props)}]
    parts: list[str] = []
    for page in pages:
        controls = "".join(
            _control(order[name], name, props[name], name in required, payload) for name in page["fields"]
        )
        if page.get("title"):
            parts.append(f"<fieldset><legend>{_esc(page['title'])}</legend>{controls}</fieldset>")
        else:
            parts.append(controls)
    body = (
        f"{_HEAD}<title>Answer</title>{_STYLE}<h1>Your answer</h1><p>{_esc(asked.question)}</p>"
        f"<div id=w><form id=f method=post>{''.join(parts)}<button type=submit>Submit</button></form></div>"
        f"<p id=s role=status aria-live=polite></p><script>{FORM_SCRIPT}</script></html>"
    )
    return body.encode()


# Constant. Accept and reject post at once; an edit is parsed, its changed keys are listed
# (before and after), and a second press sends it. The proposal's hash comes from the form's
# data attribute (rendered from the stored proposal, never from the request).
REVIEW_SCRIPT = (
    "const f=document.getElementById('f'),s=document.getElementById('s'),w=document.getElementById('w"
    "'),d=document.getElementById('d'),a=document.getElementById('a'),h=f.dataset.hash;let edited=nul"
    "l;const send=async ans=>{for(const b of f.querySelectorAll('button'))b.disabled=true;s.textConte"
    "nt='Sending\\u2026';try{const r=await fetch(location.href,{method:'POST',headers:{'Content-Type':"
    "'application/json'},body:JSON.stringify({answer:ans})});let j={};try{j=await r.json()}catch(x){}"
    "if(r.ok){w.hidden=true;s.textContent='Done'}else{s.textContent=(j&&typeof j.error==='string')?j."
    "error:('Error '+r.status);for(const b of f.querySelectorAll('button'))b.disabled=false}}catch(x)"
    "{s.textContent='Could not send the decision; please try again.';for(const b of f.querySelectorAl"
    "l('button'))b.disabled=false}};const show=v=>JSON.stringify(v);document.addEventListener('click'"
    ",e=>{const b=e.target.closest('button[data-decision]');if(!b)return;e.preventDefault();const k=b"
    ".dataset.decision;if(k==='accept')return send({decision:'accept',arguments_sha256:h});if(k==='re"
    "ject'){const r=document.getElementById('r').value.trim();return send(r?{decision:'reject',reason"
    ":r}:{decision:'reject'})}if(k==='respond'){const t=document.getElementById('t').value.trim();if("
    "!t){s.textContent='Write a response first.';return}return send({decision:'respond',text:t})}if(k"
    "==='edit'){let v;try{v=JSON.parse(a.value)}catch(x){s.textContent='The arguments are not valid J"
    "SON: '+x.message;return}if(v===null||typeof v!=='object'||Array.isArray(v)){s.textContent='The a"
    "rguments must be a JSON object.';return}const o=JSON.parse(f.dataset.args),keys=[...new Set([..."
    "Object.keys(o),...Object.keys(v)])].sort(),rows=keys.filter(x=>show(o[x])!==show(v[x]));d.replac"
    "eChildren(...rows.map(x=>{const li=document.createElement('li');li.textContent=x+': '+(x in o?sh"
    "ow(o[x]):'(none)')+' \\u2192 '+(x in v?show(v[x]):'(removed)');return li}));if(edited!==null&&sho"
    "w(edited)===show(v))return send({decision:'edit',arguments:v,arguments_sha256:h});edited=v;s.tex"
    "tContent=rows.length?'Check the changes, then press Send the edit.':'Nothing changed.';b.textCon"
    "tent='Send the edit'}});"
)


def review_page(asked: InteractionAsked) -> bytes:
    """The proposed action of a review question and the decisions it allows
    (docs/review.md#the-review-page)."""
    payload = asked.format_payload or {}
    action = payload.get("action") or {}
    decisions = payload.get("decisions") or []
    arguments = action.get("arguments") or {}
    pretty = json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=True)
    parts = [f"<h2>{_esc(action.get('name', ''))}</h2>"]
    if action.get("description"):
        parts.append(f"<p>{_esc(action['description'])}</p>")
    parts.append(f"<pre>{_esc(pretty)}</pre>")
    if "accept" in decisions:
        parts.append("<button type=button data-decision=accept>Accept</button>")
    if "edit" in decisions:
        parts.append(
            f"<label for=a>Edit the arguments (JSON)</label><textarea id=a rows=10 style='width:100%'>"
            f"{_esc(pretty)}</textarea><ul id=d></ul><button type=button data-decision=edit>Edit</button>"
        )
    if "reject" in decisions:
        parts.append(
            "<label for=r>Reason (optional)</label><input type=text id=r>"
            "<button type=button data-decision=reject>Reject</button>"
        )
    if "respond" in decisions:
        parts.append(
            "<label for=t>Or answer in words</label><input type=text id=t>"
            "<button type=button data-decision=respond>Respond</button>"
        )
    data = f'data-hash="{_esc(arguments_sha256(arguments))}" data-args="{_esc(json.dumps(arguments))}"'
    body = (
        f"{_HEAD}<title>Review</title>{_STYLE}<h1>Review</h1><p>{_esc(asked.question)}</p>"
        f"<div id=w><form id=f {data}>{''.join(parts)}</form></div>"
        f"<p id=s role=status aria-live=polite></p><script>{REVIEW_SCRIPT}</script></html>"
    )
    return body.encode()
