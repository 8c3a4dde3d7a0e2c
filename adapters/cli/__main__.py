"""``python -m clueue.adapters.cli``: the same command line as the ``clueue`` script."""

from . import main

if __name__ == "__main__":
    main()
