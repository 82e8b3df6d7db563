#!/usr/bin/env python3
"""Stage 1: builds the demo model's training corpus from Debian packages.

Downloads the source packages' .deb files with `apt-get download` (no root
needed, nothing installed), unpacks them with `dpkg-deb -x`, turns each source
into plain-text documents, cleans them (markup, tables, boilerplate, exact
duplicate paragraphs) and splits train / held-out by document (a stable hash
of the document's id). The output is deterministic given the .deb files,
whose names and SHA-256 are recorded in `manifest.json`.

Output (in --out, default tools/train/work/corpus):
  train.jsonl, heldout.jsonl   one {"source", "id", "text"} per document
  qa.jsonl                     raw material for the chat pass (stage 5)
  manifest.json                packages, hashes, document and byte counts
"""

import argparse
import gzip
import hashlib
import html
import html.parser
import json
import pathlib
import re
import subprocess
import sys

PACKAGES = {
    "bible-kjv-text": "King James Version text (public domain)",
    "bible-kjv": "the `bible` program that decompresses it (GPL-2+; only run, not used as data)",
    "jargon-text": "The Jargon File 4.4.7 (public domain)",
    "python3.11-doc": "Python 3.11 documentation sources (PSF License 2.0)",
    "debian-reference-en": "Debian Reference (GPL-2+)",
    "debian-handbook": "The Debian Administrator's Handbook, en-US (GPL-2+ or CC-BY-SA-3.0)",
    "wordnet-base": "WordNet 3.0 glosses (WordNet 3.0 licence, BSD-like)",
}

HELDOUT_PER_MILLE = 20  # 2% of documents, chosen by hash of the id


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def fetch_packages(cache: pathlib.Path) -> dict:
    cache.mkdir(parents=True, exist_ok=True)
    found = {}
    for name in PACKAGES:
        debs = sorted(cache.glob(f"{name}_*.deb"))
        if not debs:
            run(["apt-get", "download", name], cwd=cache, stdout=subprocess.DEVNULL)
            debs = sorted(cache.glob(f"{name}_*.deb"))
        deb = debs[-1]
        unpacked = cache / ("x_" + name)
        if not unpacked.exists():
            run(["dpkg-deb", "-x", str(deb), str(unpacked)])
        found[name] = {
            "deb": deb.name,
            "sha256": hashlib.sha256(deb.read_bytes()).hexdigest(),
            "dir": unpacked,
        }
    return found


# ---------------------------------------------------------------- cleaning

TABLE_CHARS = set("│├┤┼─┬┴┌┐└┘|+=")


def is_prose(paragraph: str) -> bool:
    """A paragraph of running text, not a table, listing or command line."""
    words = paragraph.split()
    if len(words) < 6:
        return False
    letters = sum(c.isalpha() or c.isspace() for c in paragraph)
    if letters < 0.8 * len(paragraph):
        return False
    if sum(c in TABLE_CHARS for c in paragraph) > 2:
        return False
    return True


def normalise(text: str) -> str:
    text = text.replace("\u00a0", " ").replace("\t", " ")
    text = re.sub(r"[ ]{2,}", " ", text)
    return text.strip()


def paragraphs_of(text: str):
    for block in re.split(r"\n\s*\n", text):
        joined = normalise(" ".join(line.strip() for line in block.splitlines()))
        if joined:
            yield joined


# ---------------------------------------------------------------- sources

def kjv_documents(pkgs):
    """One document per chapter; verses are kept as lines of the chapter."""
    bible = pkgs["bible-kjv"]["dir"] / "usr/bin/bible"
    data = pkgs["bible-kjv-text"]["dir"] / "usr/lib"
    out = run([str(bible), "-f", "-p", str(data), "gen1:1-rev22:21"], capture_output=True, text=True).stdout
    chapters = {}
    verses = []
    for line in out.splitlines():
        m = re.match(r"^(\w+?)(\d+):(\d+) (.*)$", line)
        if not m:
            continue
        book, chapter, verse, text = m.group(1), int(m.group(2)), int(m.group(3)), normalise(m.group(4))
        chapters.setdefault((book, chapter), []).append(text)
        verses.append({"book": book, "chapter": chapter, "verse": verse, "text": text})
    docs = [{"source": "kjv", "id": f"kjv/{b}{c}", "text": "\n".join(v)} for (b, c), v in chapters.items()]
    return docs, verses


def jargon_documents(pkgs):
    """One document per Jargon File entry ("term: definition")."""
    path = pkgs["jargon-text"]["dir"] / "usr/share/doc/jargon-text/jargon.txt.gz"
    text = gzip.open(path, "rt", encoding="utf-8", errors="replace").read()
    docs, entries = [], []
    # Entries start with an indented ":term: pronunciation, part of speech" line.
    parts = re.split(r"^   :([^:\n]+):[^\n]*$", text, flags=re.M)
    for term, body in zip(parts[1::2], parts[2::2]):
        term = term.strip()
        body = re.sub(r"\{([^}]*)\}", r"\1", body)
        paras = [re.sub(r"^\[[^\]]*\]\s*", "", p) for p in paragraphs_of(body)]
        paras = [p for p in paras if is_prose(p)]
        if not term or not paras:
            continue
        docs.append({"source": "jargon", "id": f"jargon/{term}", "text": term + ": " + "\n".join(paras)})
        entries.append({"term": term, "definition": paras[0]})
    return docs, entries


RST_ROLE = re.compile(r":[\w:+-]+:`(?:[^`<]*<)?~?([^`>]+)>?`")


def clean_rst(text: str):
    """Prose paragraphs of a reStructuredText file, without directives or code."""
    kept = []
    lines = text.splitlines()
    skip_indent = None
    block = []

    def flush():
        if block:
            para = normalise(" ".join(block))
            para = RST_ROLE.sub(lambda m: m.group(1).lstrip("~.!"), para)
            para = re.sub(r"``([^`]+)``", r"\1", para)
            para = re.sub(r"\*\*?([^*]+)\*\*?", r"\1", para)
            para = re.sub(r"`([^`<]+?)(?:\s*<[^>]+>)?`_+", r"\1", para)
            para = para.replace("::", ":")
            if is_prose(para):
                kept.append(para)
            block.clear()

    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if stripped and indent <= skip_indent:
                skip_indent = None
            else:
                continue
        if not stripped:
            flush()
            continue
        if stripped.startswith(".. "):
            flush()
            directive = stripped[3:].split("::")[0]
            # Code, tables and indexes are not prose; notes and descriptions are.
            if directive in ("code-block", "sourcecode", "testcode", "doctest", "productionlist", "index",
                             "toctree", "literalinclude", "highlight", "only", "raw", "csv-table", "table",
                             "list-table", "testsetup", "testoutput", "image", "figure", "module",
                             "moduleauthor", "sectionauthor") or "::" not in stripped:
                skip_indent = indent
            continue
        if re.fullmatch(r"[=\-~^\"'`#*+.:]{3,}", stripped):
            block.clear()  # the line above was a title
            continue
        if stripped.startswith((">>>", "...", "$ ", "|")) or stripped.endswith("::") and len(stripped) == 2:
            flush()
            skip_indent = indent if stripped == "::" else None
            continue
        block.append(stripped)
        if stripped.endswith("::"):
            flush()
            skip_indent = indent
    flush()
    return kept


def python_documents(pkgs):
    root = pkgs["python3.11-doc"]["dir"] / "usr/share/doc/python3.11/html/_sources"
    docs, functions = [], []
    for path in sorted(root.rglob("*.rst.txt")):
        rel = str(path.relative_to(root))
        if rel.startswith(("whatsnew/", "c-api/", "distutils/", "install/")) or "changelog" in rel:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        paras = clean_rst(text)
        if paras:
            docs.append({"source": "python", "id": f"python/{rel}", "text": "\n".join(paras)})
        functions.extend(python_function_entries(text, rel))
    return docs, functions


def python_function_entries(text: str, rel: str):
    """(name, first description paragraph) of each documented function."""
    module = re.search(r"^\.\. module:: (\S+)", text, re.M)
    prefix = module.group(1) + "." if module else ""
    out = []
    for m in re.finditer(r"^\.\. function:: (\w+)\(([^)\n]*)\)\n((?:\s*\n|   .*\n)+)", text, re.M):
        body = [l.strip() for l in m.group(3).splitlines()]
        para = []
        for line in body:
            if not line:
                if para:
                    break
                continue
            if line.startswith(".."):
                break
            para.append(line)
        desc = normalise(" ".join(para))
        desc = RST_ROLE.sub(lambda r: r.group(1).lstrip("~.!"), desc)
        desc = re.sub(r"``([^`]+)``", r"\1", desc).replace("*", "")
        if is_prose(desc):
            out.append({"name": prefix + m.group(1), "signature": m.group(2), "description": desc, "file": rel})
    return out


def debian_reference_documents(pkgs):
    path = pkgs["debian-reference-en"]["dir"] / "usr/share/debian-reference/debian-reference.en.txt.gz"
    text = gzip.open(path, "rt", encoding="utf-8", errors="replace").read()
    docs = []
    # Sections are titled "N.N. Title" at column 0.
    for i, section in enumerate(re.split(r"\n(?=\d+\.\d+\.\s+\S)", text)):
        paras = [p for p in paragraphs_of(section) if is_prose(p)]
        if len(paras) >= 2:
            docs.append({"source": "debian-reference", "id": f"debref/{i}", "text": "\n".join(paras)})
    return docs


class _HtmlText(html.parser.HTMLParser):
    """Paragraph text of an HTML page, without scripts, code and navigation."""

    SKIP = {"script", "style", "pre", "code", "table", "nav", "head"}
    BLOCKS = {"p", "li", "dd", "dt", "h1", "h2", "h3", "h4", "div", "br", "blockquote"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth_skip = 0
        self.parts = []

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.depth_skip += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.depth_skip:
            self.depth_skip -= 1
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if not self.depth_skip:
            self.parts.append(data.replace("\n", " "))


def handbook_documents(pkgs):
    root = pkgs["debian-handbook"]["dir"] / "usr/share/doc/debian-handbook/html/en-US"
    docs = []
    for path in sorted(root.glob("*.html")):
        parser = _HtmlText()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        paras = [p for p in paragraphs_of(html.unescape("".join(parser.parts))) if is_prose(p)]
        if len(paras) >= 2:
            docs.append({"source": "debian-handbook", "id": f"handbook/{path.stem}", "text": "\n".join(paras)})
    return docs


def wordnet_glosses(pkgs):
    """(word, part of speech, gloss) of each WordNet synset's first lemma."""
    root = pkgs["wordnet-base"]["dir"] / "usr/share/wordnet"
    names = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}
    out = []
    for part, pos in names.items():
        for line in (root / f"data.{part}").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("  "):
                continue
            head, _, gloss = line.partition(" | ")
            fields = head.split()
            word = fields[4].replace("_", " ")
            word = re.sub(r"\(\w+\)$", "", word)
            definition = gloss.split(";")[0].strip()
            if word.isascii() and word.isalpha() and len(definition.split()) >= 3:
                out.append({"word": word, "pos": pos, "gloss": definition})
    return out


# ---------------------------------------------------------------- assembly

def dedupe(docs):
    """Drops paragraphs seen before (anywhere in the corpus) and emptied documents."""
    seen = set()
    out = []
    for doc in docs:
        kept = []
        for para in doc["text"].split("\n"):
            key = hashlib.sha1(para.lower().encode()).digest()
            if key in seen and doc["source"] != "kjv":  # repeated verses are the text itself
                continue
            seen.add(key)
            kept.append(para)
        if kept:
            out.append(dict(doc, text="\n".join(kept)))
    return out


def is_heldout(doc_id: str) -> bool:
    return int(hashlib.sha256(doc_id.encode()).hexdigest(), 16) % 1000 < HELDOUT_PER_MILLE


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = pathlib.Path(__file__).resolve().parent
    ap.add_argument("--out", type=pathlib.Path, default=here / "work" / "corpus")
    ap.add_argument("--debs", type=pathlib.Path, default=here / "work" / "debs")
    args = ap.parse_args()

    pkgs = fetch_packages(args.debs)
    kjv, verses = kjv_documents(pkgs)
    jargon, entries = jargon_documents(pkgs)
    python, functions = python_documents(pkgs)
    docs = dedupe(kjv + jargon + python + debian_reference_documents(pkgs) + handbook_documents(pkgs))

    args.out.mkdir(parents=True, exist_ok=True)
    counts = {}
    with open(args.out / "train.jsonl", "w") as train, open(args.out / "heldout.jsonl", "w") as held:
        for doc in docs:
            split = "heldout" if is_heldout(doc["id"]) else "train"
            (held if split == "heldout" else train).write(json.dumps(doc, ensure_ascii=False) + "\n")
            c = counts.setdefault(doc["source"], {"train_docs": 0, "heldout_docs": 0, "train_bytes": 0,
                                                  "heldout_bytes": 0})
            c[split + "_docs"] += 1
            c[split + "_bytes"] += len(doc["text"].encode())
    heldout_ids = {d["id"] for d in docs if is_heldout(d["id"])}
    with open(args.out / "qa.jsonl", "w") as qa:
        for v in verses:
            held = f"kjv/{v['book']}{v['chapter']}" in heldout_ids
            qa.write(json.dumps(dict(v, kind="verse", heldout=held), ensure_ascii=False) + "\n")
        for e in entries:
            qa.write(json.dumps(dict(e, kind="jargon", heldout=f"jargon/{e['term']}" in heldout_ids),
                                ensure_ascii=False) + "\n")
        for f in functions:
            qa.write(json.dumps(dict(f, kind="python", heldout=f"python/{f['file']}" in heldout_ids),
                                ensure_ascii=False) + "\n")
        for g in wordnet_glosses(pkgs):
            qa.write(json.dumps(dict(g, kind="wordnet", heldout=False), ensure_ascii=False) + "\n")
    manifest = {
        "packages": {n: {"deb": p["deb"], "sha256": p["sha256"], "what": PACKAGES[n]} for n, p in pkgs.items()},
        "heldout_per_mille": HELDOUT_PER_MILLE,
        "sources": counts,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    json.dump(counts, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
