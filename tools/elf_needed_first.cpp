// elf_needed_first BINARY SONAME: moves SONAME to the front of BINARY's DT_NEEDED list.
//
// Why: pip's libtorch.so and libtorch_cpu.so export a statically linked copy of std::filesystem
// (their RHEL toolchain's libstdc++_nonshared). The dynamic linker binds each symbol to the first
// object of the global scope that defines it: the executable, then its DT_NEEDED entries in order.
// When a torch library precedes libstdc++.so.6 there, our calls and even libstdc++'s own calls
// into std::filesystem mix two implementations with different internals, and crash (remove_all
// and filesystem_error on Ubuntu 24.04, whose libstdc++ is newer than torch's copy). The link
// line names libstdc++ first, but not every linker keeps that order in DT_NEEDED; this post-link
// step makes the order a property of the binary itself, whatever the linker did.
//
// Only the order of the DT_NEEDED entries changes: they are permuted in place inside .dynamic,
// nothing else refers to their positions. ELF64 little-endian only (x86-64, aarch64).
#include <elf.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "elf_needed_first: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T read_at(const std::vector<char>& image, std::size_t offset, const std::string& what) {
  if (offset > image.size() || image.size() - offset < sizeof(T))
    fail(what + " lies outside the file");
  T value;
  std::memcpy(&value, image.data() + offset, sizeof(T));
  return value;
}

// File offset of a virtual address, through the PT_LOAD segment that maps it.
std::size_t file_offset_of(const std::vector<Elf64_Phdr>& segments, Elf64_Addr address) {
  for (const auto& s : segments) {
    if (s.p_type == PT_LOAD && address >= s.p_vaddr && address < s.p_vaddr + s.p_filesz)
      return static_cast<std::size_t>(address - s.p_vaddr + s.p_offset);
  }
  fail("the dynamic string table is not in any loaded segment");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: elf_needed_first BINARY SONAME\n");
    return 2;
  }
  const std::string path = argv[1], wanted = argv[2];
  std::vector<char> image;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open " + path);
    image.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto header = read_at<Elf64_Ehdr>(image, 0, "the ELF header");
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB)
    fail(path + " is not a little-endian ELF64 file");

  std::vector<Elf64_Phdr> segments;
  for (unsigned i = 0; i < header.e_phnum; ++i)
    segments.push_back(read_at<Elf64_Phdr>(
        image, header.e_phoff + std::size_t{i} * header.e_phentsize, "a program header"));
  const Elf64_Phdr* dynamic = nullptr;
  for (const auto& s : segments)
    if (s.p_type == PT_DYNAMIC) dynamic = &s;
  if (dynamic == nullptr) fail(path + " has no dynamic section (statically linked?)");

  // The .dynamic array, up to DT_NULL: (tag, value) pairs.
  std::vector<Elf64_Dyn> entries;
  for (std::size_t off = dynamic->p_offset;
       off + sizeof(Elf64_Dyn) <= dynamic->p_offset + dynamic->p_filesz; off += sizeof(Elf64_Dyn)) {
    entries.push_back(read_at<Elf64_Dyn>(image, off, "a dynamic entry"));
    if (entries.back().d_tag == DT_NULL) break;
  }
  Elf64_Addr strtab = 0;
  for (const auto& e : entries)
    if (e.d_tag == DT_STRTAB) strtab = e.d_un.d_ptr;
  if (strtab == 0) fail(path + " has no dynamic string table");
  const std::size_t strtab_offset = file_offset_of(segments, strtab);

  std::vector<std::size_t> needed;  // indices into entries, in order
  std::size_t wanted_index = entries.size();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].d_tag != DT_NEEDED) continue;
    const std::size_t name_offset = strtab_offset + entries[i].d_un.d_val;
    if (name_offset >= image.size()) fail("a DT_NEEDED name lies outside the file");
    const std::string name(image.data() + name_offset,
                           strnlen(image.data() + name_offset, image.size() - name_offset));
    if (name == wanted) wanted_index = i;
    needed.push_back(i);
  }
  if (wanted_index == entries.size()) fail(path + " does not link " + wanted);
  if (needed.front() == wanted_index) return 0;  // already first

  // Rotate: wanted first, the others keep their relative order.
  std::vector<Elf64_Dyn> reordered{entries[wanted_index]};
  for (std::size_t i : needed)
    if (i != wanted_index) reordered.push_back(entries[i]);
  for (std::size_t k = 0; k < needed.size(); ++k) entries[needed[k]] = reordered[k];

  std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
  if (!out) fail("cannot open " + path + " for writing");
  out.seekp(static_cast<std::streamoff>(dynamic->p_offset));
  out.write(reinterpret_cast<const char*>(entries.data()),
            static_cast<std::streamsize>(entries.size() * sizeof(Elf64_Dyn)));
  if (!out) fail("cannot write " + path);
  return 0;
}
