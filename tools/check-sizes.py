#!/usr/bin/env python3
"""Checks that no Swift function is longer than 80 lines and no file longer than 600 in Sources/,
server/Sources and tiler/Sources, unless a comment says why it must be one piece.

A function (func, init, deinit, subscript) is counted from its declaration's first line to its
closing brace; the doc comments and attributes above it are not counted. A file is counted
whole. The exemption is a comment containing `one piece:` and the reason: for a function among
the comment lines directly above its declaration, for a file in its first 20 lines.

  tools/check-sizes.py [--report] [PATH...]
      exits 1 naming each function or file over its limit (with --report: lists them and
      exits 0); PATHs default to this package's source folders. Run by .ci/run.
"""
import os
import re
import sys

FUNCTION_LIMIT = 80
FILE_LIMIT = 600
MARKER = "one piece:"
DECLARATION = re.compile(
    r"^\s*(?:@[\w().:, \"]+\s+)*(?:(?:public|package|internal|private|fileprivate|open|static|class|"
    r"final|override|mutating|nonmutating|nonisolated|convenience|required|dynamic|indirect|"
    r"consuming|borrowing|isolated|@\w+(?:\([^)]*\))?)\s+)*(?:func\s+[^\s(<]+|init[?!]?\s*[(<]|deinit\b|subscript\s*[(<])")


def code_mask(text):
    """The text with comments and string literals blanked (newlines kept), so braces count."""
    out = []
    i, n = 0, len(text)
    depth_comment = 0
    while i < n:
        c = text[i]
        two = text[i:i + 2]
        if depth_comment:
            if two == "/*":
                depth_comment += 1
                out.append("  ")
                i += 2
            elif two == "*/":
                depth_comment -= 1
                out.append("  ")
                i += 2
            else:
                out.append("\n" if c == "\n" else " ")
                i += 1
            continue
        if two == "//":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if two == "/*":
            depth_comment = 1
            out.append("  ")
            i += 2
            continue
        m = re.match(r'(#*)("""|")', text[i:i + 12])
        if m:
            hashes, quote = m.group(1), m.group(2)
            close = quote + hashes
            j = i + len(m.group(0))
            interpolation = "\\" + hashes + "("
            while j < n:
                if text.startswith(close, j):
                    j += len(close)
                    break
                if text.startswith("\\" + hashes, j) and not text.startswith(interpolation, j):
                    j += 1 + len(hashes) + 1
                    continue
                if text.startswith(interpolation, j):
                    # Skip the interpolated expression, counting parentheses (strings inside it are rare).
                    j += len(interpolation)
                    level = 1
                    while j < n and level:
                        if text[j] == "(":
                            level += 1
                        elif text[j] == ")":
                            level -= 1
                        j += 1
                    continue
                if quote == '"' and text[j] == "\n":
                    break
                j += 1
            segment = text[i:j]
            out.append("".join("\n" if ch == "\n" else " " for ch in segment))
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(path, text):
    """(name, first line, line count, exempt) of each function in the file."""
    lines = text.split("\n")
    masked = code_mask(text).split("\n")
    found = []
    for index, line in enumerate(masked):
        if not DECLARATION.match(line):
            continue
        # Find the body's opening brace (a protocol requirement has none before the next declaration).
        depth, start, end = 0, None, None
        for k in range(index, len(masked)):
            for ch in masked[k]:
                if ch == "{":
                    depth += 1
                    if start is None:
                        start = k
                elif ch == "}":
                    depth -= 1
                    if start is not None and depth == 0:
                        end = k
                        break
            if end is not None:
                break
            if start is None and k > index and (DECLARATION.match(masked[k]) or masked[k].strip() == "}"):
                break
            if start is None and k - index > 30:
                break
        if end is None:
            continue
        above = []
        k = index - 1
        while k >= 0 and (lines[k].strip().startswith(("//", "@", "/*", "*")) or lines[k].strip().endswith("*/")):
            above.append(lines[k])
            k -= 1
        exempt = any(MARKER in comment for comment in above)
        name = re.sub(r"\s+", " ", lines[index].strip())[:90]
        found.append((name, index + 1, end - index + 1, exempt))
    return found


def swift_files(roots):
    for root in roots:
        if os.path.isfile(root):
            yield root
            continue
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".build"))
            for name in sorted(files):
                if name.endswith(".swift"):
                    yield os.path.join(folder, name)


def main(argv):
    report = "--report" in argv
    roots = [a for a in argv if not a.startswith("--")]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not roots:
        roots = [os.path.join(here, p) for p in ("Sources", "server/Sources", "tiler/Sources")]
    over = []
    for path in swift_files(roots):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        shown = os.path.relpath(path, here)
        count = text.count("\n")
        head = "\n".join(text.split("\n")[:20])
        if count > FILE_LIMIT and MARKER not in head:
            over.append(f"{shown}: {count} lines (a file: at most {FILE_LIMIT})")
        for name, line, length, exempt in functions(path, text):
            if length > FUNCTION_LIMIT and not exempt:
                over.append(f"{shown}:{line}: {length} lines (a function: at most {FUNCTION_LIMIT}): {name}")
    for entry in over:
        print(entry)
    if over and not report:
        print(f"check-sizes: {len(over)} over the limits; split them, or say at the top why one must be "
              f"one piece ('{MARKER} REASON')", file=sys.stderr)
        return 1
    if not over:
        print("check-sizes: every function within 80 lines, every file within 600")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
