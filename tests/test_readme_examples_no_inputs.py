"""The README's blocks that do not use `examples/make_inputs.py`'s outputs, run as written from a fresh
copy of `examples/` (the convention, and why the blocks run in two files: tests/test_readme_examples.py)."""

from __future__ import annotations

import pytest

from tests.test_readme_examples import readme_blocks_for, run_readme_blocks


@pytest.mark.slow  # ~15 CLI processes: dry runs, a canary and a white-box audit, accountants, the ledger
def test_readme_code_blocks_without_example_inputs_run_from_a_fresh_copy(tmp_path, preloaded_cli_socket):
    assert run_readme_blocks(tmp_path, readme_blocks_for(False), preloaded_cli_socket) >= 4
