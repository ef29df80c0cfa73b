"""Pure parts of batched listing generation: splitting, header parsing, checks, chunks."""
from __future__ import annotations

import pytest

from spmi.tools import dasm_gen as dg

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

L1 = b"; Assembly listing for method A:M(int):int (Tier1)\n; Emitting\n\nbody1\n; Total bytes of code 3\n\n"
L2 = b"; Assembly listing for method B:N():this (FullOpts)\r\nbody2\r\n"
L3 = b"; Assembly listing for method C:(x) (y):void (Tier0)\nbody3 mentions ; Assembly listing for method Z\n"


def test_split_at_header_lines_only():
    preamble, pieces = dg.split_listings(L1 + L2 + L3)
    assert preamble == b""
    assert pieces == [L1, L2, L3]
    assert b"".join(pieces) == L1 + L2 + L3


def test_split_keeps_preamble_and_handles_no_headers():
    assert dg.split_listings(b"warn\n" + L1) == (b"warn\n", [L1])
    assert dg.split_listings(b"nothing") == (b"nothing", [])


def test_parse_header_takes_the_last_parenthesised_tier():
    assert dg.parse_header(L1) == dg.ExpectedMethod("A:M(int):int", "Tier1")
    assert dg.parse_header(L2) == dg.ExpectedMethod("B:N():this", "FullOpts")
    assert dg.parse_header(L3) == dg.ExpectedMethod("C:(x) (y):void", "Tier0")
    assert dg.parse_header(b"body") is None


EXPECTED = {5: dg.ExpectedMethod("A:M(int):int", "Tier1"), 9: dg.ExpectedMethod("B:N():this", "FullOpts")}


def test_check_batch_accepts_matching_listings():
    check = dg.check_batch(L1 + L2, [5, 9], EXPECTED)
    assert check.ok and check.listings == (L1, L2)


def test_check_batch_rejects_count_order_and_preamble_problems():
    assert not dg.check_batch(L1, [5, 9], EXPECTED).ok
    swapped = dg.check_batch(L2 + L1, [5, 9], EXPECTED)
    assert not swapped.ok and "context 5" in swapped.reason
    assert not dg.check_batch(b"oops\n" + L1 + L2, [5, 9], EXPECTED).ok


def test_base_listings_named_differently_pass_when_their_size_matches():
    renamed = {5: dg.ExpectedMethod("A:M(int):int", "Tier1")}
    other_name = L1.replace(b"A:M(int):int", b"A:M(System.Int32):System.Int32")
    assert not dg.check_batch(other_name, [5], renamed).ok, "the diff side compares names strictly"
    assert dg.check_batch(other_name, [5], renamed, strict_names=False, sizes={5: 3}).ok
    assert not dg.check_batch(other_name, [5], renamed, strict_names=False, sizes={5: 4}).ok
    assert not dg.check_batch(other_name, [5], renamed, strict_names=False).ok
    assert dg.footer_code_bytes(L1) == 3 and dg.footer_code_bytes(L2) is None


def test_check_batch_skips_contexts_without_a_reported_name():
    check = dg.check_batch(L2 + L1, [5, 9], {5: dg.ExpectedMethod("", ""), 9: dg.ExpectedMethod("", "")})
    assert check.ok


def test_chunks_are_contiguous_balanced_and_cover_everything():
    chunks = dg.chunk_contexts(list(range(10, 0, -1)), 3)
    assert chunks == [[1, 2, 3, 4], [5, 6, 7], [8, 9, 10]]
    assert dg.chunk_contexts([4, 2], 8) == [[2], [4]]
    assert dg.chunk_contexts([], 4) == []


@pytest.mark.parametrize("workers, jits, expected", [(1, 2, 1), (2, 2, 1), (3, 2, 2), (4, 2, 2), (3, 1, 3), (2, 0, 2)])
def test_each_jit_gets_a_share_of_the_workers_rounded_up(workers, jits, expected):
    assert dg.chunks_per_jit(workers, jits) == expected


def test_listing_env():
    env = dg.listing_env(gcinfo=True, debuginfo=True)
    assert env["DOTNET_JitDisasm"] == "*" and env["DOTNET_JitGCDump"] == "*"
    assert env["DOTNET_JitDisasmWithDebugInfo"] == "1" and "DOTNET_JitDump" not in env
    assert "DOTNET_JitStdOutFile" not in env
