"""opcost's validation scripts (overhead/, instructions/, anchors/, compare/)
and the library they share (harness/). A package so that the scripts import
their parts as validation.harness.* and validation.anchors.*."""
