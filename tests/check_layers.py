"""The rooms' layering (ARCHITECTURE.md): an #include of another room only runs down the list,
so no include runs upward and no folders form a loop. Exit 1 naming each offending include.

    python tests/check_layers.py SOURCE_DIR
"""
import os
import re
import sys

# Lowest first; rooms on one line may not include each other.
LAYERS = [["util"], ["repro"], ["interpreter", "compare"], ["results"], ["runtime"], ["verifier"], ["verify"],
          ["minifier"], ["profile", "ci", "report"], ["cli"]]
OUTSIDE = {"tests", "fuzz", "bench"}  # may include any room


def level(room):
    return next((i for i, rooms in enumerate(LAYERS) if room in rooms), None)


def offending(root):
    bad = []
    for rooms in LAYERS:
        for room in rooms:
            for dirpath, _, files in os.walk(os.path.join(root, room)):
                for f in files:
                    if not f.endswith((".h", ".cpp", ".def")):
                        continue
                    path = os.path.join(dirpath, f)
                    for n, line in enumerate(open(path, errors="replace"), 1):
                        m = re.match(r'\s*#\s*include\s+"([^/"]+)/', line)
                        if not m or m.group(1) == room or m.group(1) in OUTSIDE:
                            continue
                        target = level(m.group(1))
                        if target is None:
                            continue
                        if target >= level(room):
                            rel = os.path.relpath(path, root)
                            bad.append(f"{rel}:{n}: {room}/ includes {m.group(1)}/ ({line.strip()}), which is not below it")
    return bad


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    missing = [r for rooms in LAYERS for r in rooms if not os.path.isdir(os.path.join(root, r))]
    if missing:
        print("check_layers: no such room: " + ", ".join(missing))
        return 1
    bad = offending(root)
    for b in bad:
        print(b)
    print(f"check_layers: {len(bad)} include(s) against the layering")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
