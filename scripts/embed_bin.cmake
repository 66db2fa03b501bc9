# Turns the in-page simulator (a .wasm) into C bytes: cmake -DSRC=in.wasm
# -DOUT=out.c -P embed_bin.cmake. An empty SRC writes none (a build
# without the wasm toolchain): the pages then say so.
set(bytes "")
set(n 0)
if(SRC)
  file(READ "${SRC}" hex HEX)
  string(LENGTH "${hex}" n)
  math(EXPR n "${n} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "((0x..,){16})" "\\1\n" bytes "${bytes}")
endif()
file(WRITE "${OUT}.tmp" "/* generated from ${SRC} by scripts/embed_bin.cmake */\n"
     "#include <stddef.h>\n"
     "const unsigned char kt__wasm[] = {\n${bytes}0};\n"
     "const size_t kt__wasm_len = ${n};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
