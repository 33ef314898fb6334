// SPDX-License-Identifier: Apache-2.0
// The test program that the tests' precompiled header is built for (tests/CMakeLists.txt): it
// has no test of its own.
