"""The lab's languages (labs/i18n.py): choosing one, --lang on every command, complete and consistent catalogs, and
English output exactly as before."""

import json
import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from labs import cli, i18n
from labs.course import QUOTES, TEXTS
from labs.i18n import LOCALE_DIR, _, join, language_from_environment, ngettext, set_language, tr
from labs.registry import Check, CheckFailed, Evidence, Result, load_checks, see_line

CATALOGS = {lang: LOCALE_DIR / lang / "LC_MESSAGES" / "labs.po" for lang in ("ru", "nb", "es")}
FIELD = re.compile(r"\{([a-z_][a-z0-9_]*)(![rsa])?(:[^{}]*)?\}")  # a named placeholder, as str.format reads it
SETTING = re.compile(r"@[a-z][a-z0-9_.]*@")  # a hint's @placeholder@ (labs.registry.render_see)
CODE = re.compile(r"`[^`]*`")  # commands, paths and flags in a hint stay as they are


@pytest.fixture(autouse=True)
def english_afterwards():
    yield
    set_language(None)


def catalog(lang: str):
    with CATALOGS[lang].open("rb") as po:
        return read_po(po, locale=lang)


# --------------------------------------------------------------------------- choosing the language


@pytest.mark.parametrize(("environ", "lang"), [
    ({}, "en"),
    ({"LANG": "C.UTF-8"}, "en"),
    ({"LANG": "POSIX"}, "en"),
    ({"LANG": "fr_FR.UTF-8"}, "en"),
    ({"LANG": "ru_RU.UTF-8"}, "ru"),
    ({"LANG": "nb_NO.UTF-8"}, "nb"),
    ({"LANG": "nn_NO.UTF-8"}, "nb"),
    ({"LANG": "no_NO"}, "nb"),
    ({"LANG": "es_ES.UTF-8"}, "es"),
    ({"LANG": "es_AR@euro"}, "es"),
    ({"LANG": "es_ES.UTF-8", "LC_MESSAGES": "ru_RU.UTF-8"}, "ru"),
    ({"LC_MESSAGES": "ru_RU.UTF-8", "LC_ALL": "C"}, "en"),
    ({"LC_ALL": "nb_NO.UTF-8", "LANG": "ru_RU.UTF-8"}, "nb"),
    ({"LANGUAGE": "fr:es:ru", "LANG": "ru_RU.UTF-8"}, "es"),
    ({"LANGUAGE": "fr", "LANG": "ru_RU.UTF-8"}, "ru"),
])
def test_the_language_comes_from_the_locale(environ, lang):
    assert language_from_environment(environ) == lang


def test_an_unknown_language_is_refused():
    with pytest.raises(ValueError, match="unknown language"):
        set_language("de")


@pytest.mark.parametrize("argv", [["--lang", "ru", "list"], ["list", "--lang", "ru"]])
def test_lang_is_taken_before_and_after_the_subcommand(argv, capsys, monkeypatch):
    monkeypatch.setenv("LANG", "es_ES.UTF-8")
    assert cli.main(argv) == 0
    assert i18n.language() == "ru"
    assert "Кластер — это управляющие ноды и рабочие ноды" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["list", "show C01", "hint C01", "check C01", "diagram", "status", "ssh cp1",
                                     "break --list"])
def test_every_command_accepts_lang(command):
    words = command.split()
    assert cli.make_parser().parse_args([words[0], "--lang", "nb", *words[1:]]).lang == "nb"
    assert cli.make_parser().parse_args(["--lang", "es", *words]).lang == "es"
    assert cli.make_parser().parse_args(words).lang is None  # from the locale


def test_without_lang_the_locale_decides(capsys, monkeypatch):
    monkeypatch.setenv("LANG", "es_ES.UTF-8")
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    cli.main(["hint", "C02"])
    assert "Cuando falla:" in capsys.readouterr().out


# --------------------------------------------------------------------------- what the commands print


def test_list_in_russian(capsys):
    cli.main(["list", "--lang", "ru"])
    out = capsys.readouterr().out
    assert "вид" in out.splitlines()[0]
    assert "C08  разрушает" in out and "etcd — память кластера" in out


def test_show_in_norwegian_quotes_the_course_in_its_own_language(capsys):
    cli.main(["show", "C08", "--lang", "nb"])
    out = capsys.readouterr().out
    assert "Påstand: etcd er klyngens minne" in out
    assert "001 (norsk): «Tenk på det som klyngens permanente minne.»" in out
    assert "— Think of it" not in out and "Tenk på det som klyngens permanente minne.»\n      —" not in out
    # the command as it is, its comment in nb
    assert "lab ssh $n -- systemctl stop etcd; done   # hvert etcd-medlem" in out
    assert "Hva sjekken gjør: Oppretter en ConfigMap" in out


def test_show_glosses_a_quote_in_another_language(capsys):
    cli.main(["show", "C08", "--lang", "es"])
    out = capsys.readouterr().out
    assert "001 (noruego): «Tenk på det som klyngens permanente minne.»\n      — Piense en él" in out


def test_hint_in_spanish_keeps_commands_and_fills_placeholders(capsys, monkeypatch):
    monkeypatch.setattr(cli, "published_settings", lambda _path: {"ports": {"api_server": 6443}})
    cli.main(["hint", "C02", "--lang", "es"])
    out = capsys.readouterr().out
    assert out.startswith("C02: Un nodo del plano de control puede ejecutar cargas de trabajo que toleran su taint\n")
    assert "Cuando falla:" in out
    assert "a cp1 le falta el taint NoSchedule (taints: …): alguien lo quitó (`kubectl taint node cp1 " in out
    cli.main(["hint", "C05", "--lang", "es"])
    assert "cp2 (https://…:6443): pod mal formado" in capsys.readouterr().out


def test_english_output_is_unchanged(capsys, monkeypatch):
    monkeypatch.setattr(cli, "published_settings", lambda _path: {})
    cli.main(["list", "--lang", "en"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ID   kind     title"
    assert out[1] == "C01  observe  A cluster is control-plane nodes and worker nodes"
    assert out[8] == ("C08  disrupt  etcd is the cluster's memory: nothing works without it, nothing is lost when it "
                      "returns")
    cli.main(["hint", "C01", "--lang", "en"])
    out = capsys.readouterr().out
    assert out.startswith("C01: A cluster is control-plane nodes and worker nodes\n\nWhen it fails:\n"
                          "  - inventory machines")
    cli.main(["show", "C08", "--lang", "en"])
    out = capsys.readouterr().out
    assert "Claim: etcd is the cluster's memory: without it the cluster cannot work, and nothing is lost" in out
    assert "Kind: disruptive (stops something, then restores it)\n" in out
    assert "  $ kubectl create configmap x --request-timeout=10s   # fails: nothing can store it\n" in out


# --------------------------------------------------------------------------- messages, evidence and reports


def test_a_message_is_english_until_shown_and_keeps_its_values():
    text = _("{node} lacks the NoSchedule taint (taints: {taints})").format(node="cp1", taints=_("none"))
    assert text == "cp1 lacks the NoSchedule taint (taints: none)"  # what JSON, tests and hint symptoms see
    assert tr(text, "ru") == "у cp1 нет taint NoSchedule (taints: нет)"
    assert tr(text, "es") == "a cp1 le falta el taint NoSchedule (taints: ninguno)"
    assert tr(join(", ", [_("none"), "w1"]), "nb") == "ingen, w1"
    with pytest.raises(TypeError):
        _("{0}").format("positional")


def test_plural_forms_follow_each_language():
    one, many = ngettext("{n} node", "{n} nodes", 1).format(n=1), ngettext("{n} node", "{n} nodes", 5).format(n=5)
    assert (one, many) == ("1 node", "5 nodes")
    assert tr(many, "en") == "5 nodes"


def test_evidence_and_failures_stay_english_and_show_translated():
    ev = Evidence()
    ev.expect(True, _("the pod with the toleration runs on {node}").format(node="cp1"))
    with pytest.raises(CheckFailed) as failed:
        ev.expect(False, "", _("{node} lacks the NoSchedule taint (taints: {taints})").format(node="cp1", taints=[]))
    assert ev.lines == ["ok: the pod with the toleration runs on cp1",
                        "NOT: cp1 lacks the NoSchedule taint (taints: [])"]
    assert [tr(line, "ru") for line in ev.lines] == ["ок: под с toleration работает на cp1",
                                                     "НЕТ: у cp1 нет taint NoSchedule (taints: [])"]
    assert str(failed.value) == "cp1 lacks the NoSchedule taint (taints: [])"


def test_a_translated_hint_is_picked_by_the_english_failure():
    chk = load_checks()["C09"]
    picked = chk.hints_for("timed out after 30s waiting for writes to fail with two members down", lang="ru")
    assert len(picked) == 1 and picked[0].startswith("*время вышло через 30 с в ожидании отказа записей")


def test_json_stays_english_markdown_is_translated():
    chk: Check = load_checks()["C02"]
    res = Result("C02", chk.title, "failed", [_("ok: {seen}").format(seen=_("the pod with the toleration runs on "
                                                                        "{node}").format(node="cp1"))],
                 _("{node} lacks the NoSchedule taint (taints: {taints})").format(node="cp1", taints="none"), 1.0,
                 False)
    assert json.loads(json.dumps([res.__dict__]))[0]["evidence"] == ["ok: the pod with the toleration runs on cp1"]
    set_language("es")
    md = cli.markdown([res])
    assert md.startswith("# Informe de comprobaciones de k8s-arch-lab\n")
    assert "## C02 Un nodo del plano de control puede ejecutar cargas de trabajo que toleran su taint: fallida" in md
    assert "> 000 (ruso): «В тестовых или небольших инсталляциях" in md
    assert "- ok: el pod con la toleration se ejecuta en cp1" in md


def test_see_comments_are_translated_commands_are_not():
    line = "ssh w1 'ps -o pid,args -C etcd'   # nothing"
    assert see_line(line, "ru") == "ssh w1 'ps -o pid,args -C etcd'   # ничего"
    assert see_line("kubectl get nodes", "ru") == "kubectl get nodes"


# --------------------------------------------------------------------------- the catalogs


def test_the_template_is_current():
    """labs/locale/labs.pot has every message of the code (`make i18n` extracts them)."""
    from babel.messages.extract import extract_from_dir
    from babel.messages.frontend import parse_mapping_cfg

    root = Path(i18n.__file__).parent
    with (root.parent / "babel.cfg").open() as cfg:
        methods, options = parse_mapping_cfg(cfg)
    found = {m[2] if isinstance(m[2], str) else m[2][0] for m in extract_from_dir(root, methods, options)}
    with (LOCALE_DIR / "labs.pot").open("rb") as pot:
        template = {m.id if isinstance(m.id, str) else m.id[0] for m in read_po(pot) if m.id}
    assert found - template == set(), "run `make i18n`"


@pytest.mark.parametrize("lang", sorted(CATALOGS))
def test_catalog_is_complete_and_keeps_the_placeholders(lang):
    with (LOCALE_DIR / "labs.pot").open("rb") as pot:
        template = {m.id for m in read_po(pot) if m.id}
    messages = [m for m in catalog(lang) if m.id]
    assert {m.id for m in messages} == template, "run `make i18n`"
    problems = []
    for m in messages:
        ids = [m.id] if isinstance(m.id, str) else list(m.id)
        strings = [m.string] if isinstance(m.string, str) else list(m.string)
        if m.fuzzy or not all(strings):
            problems.append(f"untranslated or fuzzy: {ids[0]!r}")
            continue
        for string in strings:
            for pattern in (FIELD, SETTING, CODE):
                want, got = sorted(pattern.findall(ids[-1])), sorted(pattern.findall(string))
                if want != got:
                    problems.append(f"{ids[0]!r}: {pattern.pattern} {want} != {got}")
            if bool(re.match(r"\*.+?\*:", ids[0])) != bool(re.match(r"\*.+?\*:", string)):
                problems.append(f"{ids[0]!r}: a hint's translation starts with its *symptom*: as the hint does")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("lang", sorted(CATALOGS))
def test_every_check_reads_in_every_language(lang):
    for chk in load_checks().values():
        for text in (chk.title, chk.claim, chk.does, *chk.hints):
            assert tr(text, lang) != text or text in ("Pending",), f"{chk.id}: {text!r} is not translated"


def test_a_quote_is_glossed_in_its_own_language_by_its_original():
    for ident, quotes in QUOTES.items():
        for q in quotes:
            assert q.text in TEXTS
            assert tr(q.gloss, q.language) == q.original, ident


def test_every_formatted_message_fills_exactly_its_placeholders():
    """A message's placeholders and the names given to its .format() are the same set, in every module: a
    mismatch raises KeyError (or shows a raw {name}) only when that line runs — often a failure branch that
    only a broken cluster reaches."""
    import ast
    import string

    root = Path(__file__).resolve().parents[2]
    wrong = []
    for path in sorted((root / "labs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"):
                continue
            inner = node.func.value
            if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name)
                    and inner.func.id in ("_", "ngettext")) or any(k.arg is None for k in node.keywords):
                continue
            texts = [a.value for a in inner.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            wanted = {field for text in texts for _, field, _, _ in string.Formatter().parse(text) if field}
            given = {k.arg for k in node.keywords}
            if wanted != given:
                wrong.append(f"{path.relative_to(root)}:{node.lineno}: {sorted(wanted)} != {sorted(given)}")
    assert not wrong, wrong
