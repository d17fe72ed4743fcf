"""check_doc_paths.py ROOT [DOC...]: every file or folder a doc names exists in the repository
(without DOCs: README.md and docs/*.md).

A doc names one as a Markdown link, [text](path) (relative to the doc), or in backticks, `path`
(relative to the repository's root, or to src/ as the layer tables write them, or to the doc's
folder); `a.{h,cpp}` stands for a.h and a.cpp. A name that leaves the repository (../) is an
error too: a reader of a clone does not have it. Exit 0: all found."""
import glob
import os
import re
import sys

root = os.path.realpath(sys.argv[1])
TOP = ("src/", "tests/", "include/", "python/", "tools/", "docs/", "bench/", "scripts/", "examples/", "cmake/", "../")
missing = []


def expand(name):
    m = re.search(r"\{([^{}]*)\}", name)
    if not m:
        return [name]
    return [x for part in m.group(1).split(",") for x in expand(name[:m.start()] + part + name[m.end():])]


def found(name, bases):
    for candidate in expand(name):
        if not any(os.path.exists(os.path.join(base, candidate)) for base in bases):
            return False
    return True


def inside(name, base):
    return os.path.realpath(os.path.join(base, name)).startswith(root + os.sep)


docs = sys.argv[2:] or [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
for doc in docs:
    here = os.path.dirname(os.path.realpath(doc))
    text = open(doc, encoding="utf-8").read()
    names = []
    for target in re.findall(r"\]\(([^)\s#]+)", text):  # Markdown links, anchors dropped
        if not re.match(r"[a-z]+:", target):  # not http:, mailto: ...
            names.append((target, [here], here))
    for token in re.findall(r"`([^`\s]+)`", text):
        token = token.rstrip(".,;:")
        if token.startswith(TOP) and re.fullmatch(r"[A-Za-z0-9_./{},*-]+", token) and "*" not in token:
            names.append((token, [root, os.path.join(root, "src"), here], root))
    for name, bases, rel in names:
        if name.startswith("../") and not inside(name, rel):
            missing.append("%s: %s is outside the repository" % (os.path.relpath(doc, root), name))
        elif not found(name, bases):
            missing.append("%s: %s does not exist" % (os.path.relpath(doc, root), name))

for m in missing:
    print("doc paths: " + m, file=sys.stderr)
if not missing:
    print("doc paths: every path named in %d docs exists" % len(docs))
sys.exit(1 if missing else 0)
