"""`python -m harness.backends.lazyfs`: the lazyfs daemon (one per mount); see harness.backends.lazyfs."""

from harness.backends.lazyfs.daemon import main

if __name__ == "__main__":
    raise SystemExit(main())
