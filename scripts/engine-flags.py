"""Print every flag an engine's own argument parser accepts, one per line.

    python3 scripts/engine-flags.py sglang > src/engine/flags/sglang-VERSION.txt
    python3 scripts/engine-flags.py vllm   > src/engine/flags/vllm-VERSION.txt

Run it with the Python that has the engine installed (SGLang's parser needs
no GPU; its wheel can be installed with --no-deps plus the few modules the
import asks for). servebench warns about `args` flags missing from these
lists, so a misspelt flag is found at plan time instead of at launch.
"""
import argparse
import sys


def parser(engine):
    if engine == "sglang":
        from sglang.srt.server_args import ServerArgs

        p = argparse.ArgumentParser()
        ServerArgs.add_cli_args(p)
        return p
    if engine == "vllm":
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        return make_arg_parser(FlexibleArgumentParser())
    sys.exit(f"unknown engine {engine!r}: sglang or vllm")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    p = parser(sys.argv[1])
    flags = {o for a in p._actions for o in a.option_strings} - {"-h", "--help"}
    print("\n".join(sorted(flags)))


if __name__ == "__main__":
    main()
