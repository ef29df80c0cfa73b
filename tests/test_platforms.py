"""OS-specific knowledge, checked for all three hosts on any machine."""
from __future__ import annotations

import signal
import threading

import pytest

from spmi.base import platforms as p

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)


@pytest.mark.parametrize("sys_platform,expected", [
    ("win32", p.WINDOWS), ("cygwin", p.WINDOWS), ("linux", p.LINUX), ("darwin", p.OSX)])
def test_detect_host_os(sys_platform, expected):
    assert p.detect_host_os(sys_platform) == expected


@pytest.mark.parametrize("machine,arch", [
    ("x86_64", "x64"), ("AMD64", "x64"), ("i386", "x86"), ("i686", "x86"),
    ("aarch64", "arm64"), ("arm64", "arm64"), ("armv7l", "arm"), ("sparc", None)])
def test_arch_from_machine(machine, arch):
    assert p.arch_from_machine(machine) == arch


@pytest.mark.parametrize("host_os,tool,name", [
    (p.WINDOWS, "superpmi", "superpmi.exe"), (p.LINUX, "superpmi", "superpmi"), (p.OSX, "mcs", "mcs")])
def test_exe_name(host_os, tool, name):
    assert p.exe_name(tool, host_os) == name


@pytest.mark.parametrize("host_os,host_arch,target_os,target_arch,force,name", [
    (p.WINDOWS, "x64", p.WINDOWS, "x64", False, "clrjit.dll"),
    (p.LINUX, "x64", p.LINUX, "x64", False, "libclrjit.so"),
    (p.OSX, "arm64", p.OSX, "arm64", False, "libclrjit.dylib"),
    (p.WINDOWS, "x64", p.WINDOWS, "arm64", False, "clrjit_universal_arm64_x64.dll"),
    (p.WINDOWS, "x86", p.LINUX, "arm", False, "clrjit_universal_arm_x86.dll"),
    (p.WINDOWS, "x64", p.WINDOWS, "x86", False, "clrjit_win_x86_x64.dll"),
    (p.WINDOWS, "x64", p.LINUX, "x64", False, "clrjit_unix_x64_x64.dll"),
    (p.LINUX, "x64", p.WINDOWS, "x64", False, "libclrjit_win_x64_x64.so"),
    (p.LINUX, "x64", p.LINUX, "arm64", False, "libclrjit_universal_arm64_x64.so"),
    (p.LINUX, "x64", p.LINUX, "x64", True, "libclrjit_unix_x64_x64.so"),
    (p.WINDOWS, "x86", p.WINDOWS, "x86", True, "clrjit_win_x86_x86.dll"),
    (p.OSX, "arm64", p.LINUX, "x64", False, "libclrjit_unix_x64_arm64.dylib"),
])
def test_jit_file_name(host_os, host_arch, target_os, target_arch, force, name):
    assert p.jit_file_name(host_os, host_arch, target_os, target_arch, force) == name


@pytest.mark.parametrize("returncode,host_os,code,crashed", [
    (0, p.LINUX, 0, False), (2, p.LINUX, 2, False), (3, p.OSX, 3, False),
    (255, p.LINUX, -1, False), (254, p.OSX, -2, False),
    (-11, p.LINUX, -11, True), (139, p.LINUX, 139, True), (-6, p.OSX, -6, True),
    (4294967295, p.WINDOWS, -1, False), (4294967294, p.WINDOWS, -2, False),
    (-1, p.WINDOWS, -1, False), (1, p.WINDOWS, 1, False),
    (3221225477, p.WINDOWS, 3221225477, True),
])
def test_normalize_exit_code(returncode, host_os, code, crashed):
    outcome = p.normalize_exit_code(returncode, host_os)
    assert (outcome.code, outcome.crashed) == (code, crashed)


def test_sigsegv_is_the_same_crash_seen_directly_or_through_a_shell():
    direct = p.normalize_exit_code(-11, p.LINUX)
    shell = p.normalize_exit_code(139, p.LINUX)
    assert direct.signal_number == shell.signal_number == 11
    assert p.signal_name(direct.signal_number) == "SIGSEGV"


@pytest.mark.parametrize("build_os,build_arch,target_os,target_arch,ok", [
    ("unix", "x64", p.LINUX, "x64", True), ("unix", "x64", p.OSX, "x64", True),
    ("unix", "x64", p.WINDOWS, "x64", False), ("win", "x86", p.WINDOWS, "x86", True),
    ("universal", "arm64", p.OSX, "arm64", True), ("universal", "arm32", p.LINUX, "arm", True),
    ("universal", "arm64", p.LINUX, "x64", False)])
def test_build_string_target_matches(build_os, build_arch, target_os, target_arch, ok):
    assert p.build_string_target_matches(build_os, build_arch, target_os, target_arch) is ok


def test_path_rules():
    assert p.is_url("https://clrjit2.blob.core.windows.net/superpmi/x.mch.zip")
    assert p.is_url("HTTP://127.0.0.1:10000/x")
    assert not p.is_url("/tmp/x.mch")
    assert p.is_unc_path(r"\\server\share\x.mch")
    assert not p.is_unc_path("C:\\x.mch")
    assert p.path_list_separator(p.WINDOWS) == ";" and p.path_list_separator(p.LINUX) == ":"
    assert p.env_var_assignment("DOTNET_JitDisasm", "*", p.WINDOWS) == "set DOTNET_JitDisasm=*"
    assert p.env_var_assignment("DOTNET_JitDisasm", "*", p.OSX) == "export DOTNET_JitDisasm=*"
    assert p.same_file_name("ClrJit.dll", "clrjit.dll", p.WINDOWS)
    assert not p.same_file_name("ClrJit.so", "clrjit.so", p.LINUX)


def test_normalize_os_accepts_old_blob_spellings():
    assert p.normalize_os("Linux") == p.LINUX
    assert p.normalize_os("OSX") == p.OSX
    assert p.normalize_os("win") == p.WINDOWS
    assert p.normalize_os("plan9") is None


@pytest.mark.parametrize("host_os, name", [("windows", "coredistools.dll"), ("linux", "libcoredistools.so"),
                                           ("osx", "libcoredistools.dylib")])
def test_coredistools_file_name(host_os, name):
    assert p.coredistools_file_name(host_os) == name


@pytest.mark.parametrize("host_os,threads,method", [
    (p.WINDOWS, 1, "spawn"), (p.WINDOWS, 3, "spawn"), (p.OSX, 1, "spawn"), (p.OSX, 2, "spawn"),
    (p.LINUX, 1, "fork"), (p.LINUX, 2, "forkserver")])
def test_worker_start_method(host_os, threads, method):
    assert p.worker_start_method(host_os, threads) == method


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no signal mask (Windows)")
def test_stop_signals_held_arrive_when_the_block_ends():
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: seen.append(number))
    try:
        with p.stop_signals_held():  # the mask is this thread's: the signal goes to this thread
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
            assert seen == [] and signal.SIGTERM in signal.sigpending()
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)
