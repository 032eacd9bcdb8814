"""Check SGLang launch command lines against SGLang's own argument parser.

Reads a JSON object on stdin: {"argvs": [[...], ...], "extensions": [...]}.
Each argv is a full command line whose flags follow `sglang.launch_server`
(or `serve`); `extensions` lists flags that belong to an extension SGLang's
release does not carry (e.g. the DDTree pull request's
`--speculative-ddtree-budget`): they and their values are set aside, and
everything else is parsed by the parser `sglang serve` builds
(ServerArgs.add_cli_args on an ArgumentParser). Prints one line per problem
and exits 1 if there is any. Needs no GPU and no model.
"""
import argparse
import json
import sys

from sglang.srt.server_args import ServerArgs


class Reject(Exception):
    pass


def flags_of(argv):
    for marker in ("sglang.launch_server", "serve"):
        if marker in argv:
            return argv[argv.index(marker) + 1:]
    return argv[1:]


def without(flags, extensions):
    out, skip = [], False
    for a in flags:
        if skip:
            skip = False
            if not a.startswith("--"):
                continue
        name = a.split("=", 1)[0]
        if name in extensions:
            skip = "=" not in a
            continue
        out.append(a)
    return out


def main():
    req = json.load(sys.stdin)
    extensions = set(req.get("extensions", []))
    problems = []
    for argv in req["argvs"]:
        parser = argparse.ArgumentParser(prog="sglang serve")
        ServerArgs.add_cli_args(parser)

        def fail(msg):
            raise Reject(msg)

        parser.error = fail
        try:
            parser.parse_args(without(flags_of(argv), extensions))
        except Reject as e:
            problems.append(f"{' '.join(argv)}: {e}")
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
