"""`python -m harness.backends.native`: build (or find in the cache) every preload shim."""

from harness.backends.native import main

main()
