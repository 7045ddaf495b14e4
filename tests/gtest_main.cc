// gtest entry point for every tier: prints the random seed so that any failure can be replayed.
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char **argv)
{
    testing::InitGoogleTest(&argc, argv);
    std::printf("gtest random seed: %d (replay with --gtest_random_seed=N)\n",
                testing::GTEST_FLAG(random_seed));
    return RUN_ALL_TESTS();
}
