// The translation unit that carries the tests' shared precompiled ATen header
// (tests/CMakeLists.txt, dtsim_test_pch); it defines nothing.
