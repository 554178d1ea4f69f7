"""The fault vocabulary: the kinds and their parameters (`kinds`), the catalogue of modes, targets and
options (`catalogue`, `options`), target choice (`targets`) and partitions as grudges (`partitions`,
`grudges`). Backends carry them out; the nemesis and the simulator's fault schedule choose them."""
