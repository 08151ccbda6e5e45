// The rendezvous store's wire format (server: rendezvous_server.cc, client:
// rendezvous_client.cc). A request is one byte of operation, then
// length-prefixed strings (u32, host byte order: both ends run the same
// build) and, for get and wait, a u32 timeout in milliseconds:
//   'S' key value            -> u8 0
//   'G' key timeout          -> u8 0 value | u8 1 (timed out)
//   'T' key                  -> u8 0 value | u8 2 (absent): get, no wait
//   'W' n key... timeout     -> u8 0 | u8 1 (timed out)
#pragma once

#include <cstdint>
#include <string>

namespace hvdtune::internal::rendezvous {

inline constexpr char kSet = 'S';
inline constexpr char kGet = 'G';
inline constexpr char kTryGet = 'T';
inline constexpr char kWait = 'W';
inline constexpr std::uint8_t kOk = 0;
inline constexpr std::uint8_t kTimedOut = 1;
inline constexpr std::uint8_t kAbsent = 2;
/// Longest key or value accepted (a rank's address list is a few KiB).
inline constexpr std::uint32_t kMaxLength = 64u << 20;

/// Whole-buffer socket I/O; false on error or a closed connection.
bool SendAll(int fd, const void* data, std::size_t n);
bool RecvAll(int fd, void* data, std::size_t n);
bool SendString(int fd, const std::string& s);
bool RecvString(int fd, std::string* s);
bool SendU32(int fd, std::uint32_t v);
bool RecvU32(int fd, std::uint32_t* v);

}  // namespace hvdtune::internal::rendezvous
