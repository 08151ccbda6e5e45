// IEEE binary16 and bfloat16 conversions. Reductions on half types are done
// in float and rounded back (round to nearest even), never on raw bits.
#pragma once

#include <bit>
#include <cstdint>

namespace hvdtune {

inline float HalfToFloat(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  std::uint32_t bits;
  if (exp == 0x1F) {  // inf / nan
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) |
             ((mant & 0x3FFu) << 13);
    }
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

inline std::uint16_t FloatToHalf(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or nan
    return sign | (abs > 0x7F800000u ? 0x7E00u : 0x7C00u);
  }
  if (abs >= 0x477FF000u) return sign | 0x7C00u;  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                        // below 2^-14: subnormal
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    const std::uint32_t exp = abs >> 23;
    const std::uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126 - exp;  // 14..24 (> 13 for subnormals)
    std::uint32_t h = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return sign | static_cast<std::uint16_t>(h);
  }
  std::uint32_t h = ((abs >> 23) - 112) << 10 | ((abs >> 13) & 0x3FFu);
  const std::uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<std::uint16_t>(h);
}

inline float BFloat16ToFloat(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t FloatToBFloat16(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) {  // nan: keep it quiet
    return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  }
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

}  // namespace hvdtune
