/* pathdiv: mixing a 32-bit value with the switch's seed (ecmp's flow hash, spray's
 * random draw), so that switches choose independently of one another. */
#ifndef PATHDIV_MIX_P4
#define PATHDIV_MIX_P4

typedef bit<32> hash_t;

/* Odd multiplier (2^32 / golden ratio): (x ^ seed) * MIX_MULTIPLIER is a bijection per
 * seed whose high bits differ non-linearly between seeds, unlike a CRC over (seed, x)
 * whose outputs for two seeds differ by a constant XOR. ecmp mixes its flow hash with
 * the switch's seed this way, spray its random draw. */
const bit<32> MIX_MULTIPLIER = 0x9E3779B1;

#endif
