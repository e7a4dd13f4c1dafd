"""The languages `lab` speaks: English (the source), Russian, Norwegian Bokmål and Spanish, from the gettext catalogs
in labs/locale/ (labs/locale/<lang>/LC_MESSAGES/labs.po).

Messages are marked with ``_()`` (and ``ngettext()``) as usual, with named {placeholders} filled by ``.format()``:

    ev.expect(ok, _("{node} carries the taint {taint}").format(node=target, taint=TAINT))

but translated when they are shown, not when they are made: ``_()`` returns a Text, a ``str`` whose value is the
English message (what the JSON and JUnit reports, the tests and the hints' symptom patterns see) and which
remembers its msgid and values, so that ``tr(text)`` can show it in the chosen language later. The checks are
registered at import time, before `lab --lang` is read, and one process can show the same result in several
languages (the terminal, the Markdown report).
"""

from __future__ import annotations

import gettext
import io
import os
from functools import cache
from pathlib import Path

LOCALE_DIR = Path(__file__).resolve().parent / "locale"
DOMAIN = "labs"
LANGUAGES = {"en": "English", "ru": "русский", "nb": "norsk bokmål", "es": "español"}
DEFAULT = "en"
# Locale names that mean one of our languages: Norwegian in any written form reads Bokmål here.
ALIASES = {"no": "nb", "nn": "nb"}

_current: str | None = None  # set by set_language (lab --lang); None: from the environment's locale


class Text(str):
    """A message in English that can be shown in another language (``tr``). Its ``str`` value is the English text,
    formatted; ``format()`` returns another Text that keeps the values (themselves translated when shown)."""

    msgid: str
    plural: str | None
    n: int | None
    values: dict | None

    def __new__(cls, msgid: str, plural: str | None = None, n: int | None = None, values: dict | None = None) -> Text:
        english = plural if plural is not None and n != 1 else msgid
        self = super().__new__(cls, english.format(**values) if values is not None else english)
        self.msgid, self.plural, self.n, self.values = msgid, plural, n, values
        return self

    def format(self, *args, **values) -> Text:  # type: ignore[override]
        if args:
            raise TypeError("translatable messages take named placeholders only: _('{name}').format(name=...)")
        return Text(self.msgid, self.plural, self.n, values)

    def __reduce__(self):  # a str subclass with attributes: keep them through copy and pickle
        return Text, (self.msgid, self.plural, self.n, self.values)


def _(message: str) -> Text:
    """Mark a message for translation (pybabel extract finds it); shown translated by ``tr``."""
    return Text(message)


def ngettext(singular: str, plural: str, n: int) -> Text:
    """A message with a singular and a plural form, chosen by ``n`` for each language (``{n}`` is not filled: pass
    it to ``format``)."""
    return Text(singular, plural, n)


def join(separator: str, items) -> Text:
    """``separator.join(items)`` as a Text: the items that are Texts are shown translated."""
    items = list(items)
    return Text(separator.join(f"{{item{i}}}" for i in range(len(items))),
                values={f"item{i}": item for i, item in enumerate(items)})


def language_from_environment(environ: os._Environ | dict | None = None) -> str:
    """The language the locale asks for: the entries of LANGUAGE (a colon-separated list), then the locale
    messages are shown in (LC_ALL, else LC_MESSAGES, else LANG). The first we speak wins; C, POSIX or none: English."""
    env = os.environ if environ is None else environ
    wanted = [e for e in env.get("LANGUAGE", "").split(":") if e]
    wanted += [next((env[v] for v in ("LC_ALL", "LC_MESSAGES", "LANG") if env.get(v)), "")]
    for name in wanted:
        code = name.split(".")[0].split("@")[0].split("_")[0].split("-")[0].lower()
        code = ALIASES.get(code, code)
        if code in LANGUAGES:
            return code
    return DEFAULT


def set_language(lang: str | None) -> str:
    """Show messages in ``lang`` from now on (None: the environment's locale); returns the language chosen."""
    global _current  # noqa: PLW0603 - one display language per process, chosen by the command line
    if lang is not None and lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; known: {', '.join(LANGUAGES)}")
    _current = lang
    return language()


def language() -> str:
    return _current or language_from_environment()


@cache
def translations(lang: str) -> gettext.NullTranslations:
    """The catalog of ``lang``, read from its .po file. No compiled .mo in the repository, and no build step a fresh
    clone could miss: Babel reads the .po (the file translators edit and git reviews) and compiles it in memory,
    once per language and process (a few milliseconds). English is the msgids themselves."""
    if lang == DEFAULT:
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with (LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.po").open("rb") as po:
        catalog = read_po(po, locale=lang, domain=DOMAIN)
    mo = io.BytesIO()
    write_mo(mo, catalog, use_fuzzy=False)
    mo.seek(0)
    return gettext.GNUTranslations(mo)


def tr(text: object, lang: str | None = None) -> str:
    """``text`` in ``lang`` (default: the chosen language); anything that is not a Text is shown as it is."""
    if not isinstance(text, Text):
        return str(text)
    catalog = translations(lang or language())
    if text.plural is not None:
        message = catalog.ngettext(text.msgid, text.plural, text.n if text.n is not None else 1)
    else:
        message = catalog.gettext(text.msgid)
    if text.values is None:
        return message
    return message.format(**{k: tr(v, lang) if isinstance(v, Text) else v for k, v in text.values.items()})


def extract(fileobj, keywords, comment_tags, options):
    """pybabel's extractor for labs/ (babel.cfg): the _() and ngettext() messages, as Babel's Python extractor finds
    them, and the comments of the checks' "see it yourself" commands (``see=["cmd   # comment"]``), which are
    translated when shown (labs.registry.see_line) and written without a marker."""
    import ast

    from babel.messages.extract import extract_python

    from labs.registry import SEE_COMMENT

    source = fileobj.read()
    fileobj.seek(0)
    yield from extract_python(fileobj, keywords, comment_tags, options)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check":
            for keyword in (k for k in node.keywords if k.arg == "see"):
                for item in keyword.value.elts:
                    if isinstance(item, ast.Constant) and (match := SEE_COMMENT.match(item.value)):
                        yield item.lineno, "", match.group(2), ["a comment of a shell command; the command stays"]
