# The fuzz targets, one per parser a user's bytes reach: fuzz/CMakeLists.txt builds them (the
# sanitizer build), tests/CMakeLists.txt runs each. A new target is its file and one word here.
set(PARITY_FUZZ_TARGETS safetensors graph_json graph_hops manifest compare)
