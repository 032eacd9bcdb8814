"""Check `vllm serve` command lines against the real vLLM argument parser.

Reads a JSON list of argv lists (each `[..., "serve", MODEL, flags...]`)
on stdin; parses each with the parser `vllm serve` builds
(make_arg_parser on a FlexibleArgumentParser), and checks the keys and
method of any --speculative-config against SpeculativeConfig. Prints one
line per problem and exits 1 if there is any. Needs no GPU and no model.
"""
import dataclasses
import json
import sys
import typing

from vllm.config.speculative import SpeculativeConfig, SpeculativeMethod
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser


def methods():
    out = set()
    stack = [SpeculativeMethod]
    while stack:
        t = stack.pop()
        args = typing.get_args(t)
        for a in args:
            if isinstance(a, str):
                out.add(a)
            else:
                stack.append(a)
    return out


class Reject(Exception):
    pass


def main():
    argvs = json.load(sys.stdin)
    fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    known = methods()
    problems = []
    for argv in argvs:
        rest = argv[argv.index("serve") + 1:]
        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))

        def fail(msg):
            raise Reject(msg)

        parser.error = fail
        try:
            ns = parser.parse_args(rest)
        except (Reject, SystemExit) as e:
            problems.append(f"{' '.join(rest)}: {e}")
            continue
        spec = getattr(ns, "speculative_config", None)
        if spec:
            if isinstance(spec, str):
                spec = json.loads(spec)
            for k in spec:
                if k not in fields:
                    problems.append(f"--speculative-config key {k!r} is not a SpeculativeConfig field")
            if spec.get("method") not in known:
                problems.append(f"--speculative-config method {spec.get('method')!r} not in {sorted(known)}")
        print("ok", json.dumps(rest))
    for p in problems:
        print("problem:", p)
    sys.exit(1 if problems else 0)


main()
