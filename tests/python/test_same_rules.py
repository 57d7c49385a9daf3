"""The Python comparison rules (parity_capture/same.py, which the standalone repro.py inlines)
give torch._dynamo.utils.same()'s verdict on every case of the conformance corpus, the corpus
the C++ comparator is tested on (tests/test_compare_same.cpp): so repro.py and parity agree."""
import json
import os

import pytest
from safetensors.torch import load_file

from parity_capture.same import same_tensor

DATA = os.environ.get("PARITY_TEST_DATA", "")


@pytest.mark.skipif(not DATA, reason="PARITY_TEST_DATA unset")
def test_same_rules_match_the_conformance_corpus():
    corpus = json.load(open(os.path.join(DATA, "same_cases.json")))
    t = load_file(os.path.join(DATA, "same_cases.safetensors"))
    mismatched = []
    for c in corpus["cases"]:
        k = f"case{c['id']}"
        o = c["options"]
        ok, rule, msg = same_tensor(t[k + "/ref"], t[k + "/res"], t.get(k + "/fp64"), tol=o["tol"], equal_nan=o["equal_nan"],
                                    cos_similarity=o["cos_similarity"], exact_dtype=o["exact_dtype"],
                                    ignore_non_fp=o["ignore_non_fp"],
                                    use_larger_multiplier_for_smaller_tensor=o["use_larger_multiplier_for_smaller_tensor"],
                                    force_max_multiplier=o["force_max_multiplier"], use_iou_for_bool=o["use_iou_for_bool"])
        if ok != c["expected"]:
            mismatched.append((k, c["category"], o, c["expected"], rule, msg))
    assert len(corpus["cases"]) >= 500
    assert not mismatched, mismatched[:5]


def test_repro_script_inlines_the_rules_and_imports_no_parity(tmp_path):
    from parity_capture.repro_script import write_script
    d = tmp_path / "r"
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps({"backend": {"name": "inductor", "options": {}}, "failure": {"tol": 1e-3}}))
    text = open(write_script(str(d), "inductor", str(d / "repro.py"))).read()
    assert "def same_tensor(" in text and "def graph_from_json(" in text
    assert "parity_capture" not in text.replace("# Standalone repro", "")
    assert 'DYNAMO_BACKEND = "inductor"' in text
    compile(text, "repro.py", "exec")  # valid Python


def test_a_world_script_inlines_the_rules_and_the_rank_set_up_and_imports_no_parity(tmp_path):
    """repro_script.write_world_script: the repro.py of a minimum reduced across ranks."""
    from parity_capture.repro_script import write_world_script
    text = open(write_world_script(str(tmp_path / "repro.py"), "inductor", {"max_autotune": "False"}, 1e-3, 4,
                                   "a minimum", imports=["my_plugin"])).read()
    assert "def same_tensor(" in text and "def graph_from_json(" in text and "def torchrun_main(" in text
    assert "def joined(" in text and "parity_capture" not in text
    assert 'DYNAMO_BACKEND = "inductor"' in text and "TOL = 0.001" in text and "import my_plugin" in text
    assert "--nproc-per-node 4 repro.py" in text
    compile(text, "repro.py", "exec")  # valid Python
