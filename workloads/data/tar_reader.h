// WebDataset's tar shards as a source of training images (`--data=shards`): each shard's members
// in order, a sample the consecutive members that share a key (the name up to its first dot
// after the last slash), its image the member ending .jpg or .jpeg (any case), its label the
// member ending .cls (a whole number in decimal). Tar headers are read as POSIX ustar and GNU tar
// write them (regular files; a GNU long name or a pax header's path names the next member;
// folders, links and other types skipped), each header's checksum checked.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/data/image_folder.h"

namespace dlb {

// One member of a tar archive: its name, and where its bytes are in the file.
struct TarMember {
  std::string name;
  uint64_t offset = 0, size = 0;
};

// The regular files of a tar archive held in `bytes` (`where` names it in errors), in order.
// InvalidArgument for a header whose checksum or size field is wrong, or a member that runs past
// the end; the two zero blocks that end an archive (or the file's end at a block boundary) end it.
std::vector<TarMember> tar_members(const uint8_t* bytes, size_t size, const std::string& where);

struct ShardIndex {
  std::vector<std::string> shards;   // the files, sorted
  std::vector<ImageSample> samples;  // each an image's bytes in a shard, with its label
  int64_t classes = 0;               // the largest label + 1
  std::vector<std::string> notes;    // samples without an image or a label: one line each
};

// The shards `pattern` names (a glob; a folder: its *.tar), read whole once to index them.
// InvalidArgument when it names no tar file, or no sample has both an image and a label.
ShardIndex index_shards(const std::string& pattern);

}  // namespace dlb
