// tests/support/fair_fleet_tenants.h
//
// Provides the tenants of the federated weighted-fair escrow evaluations
// (tests/federation/federated_fair_escrow_test.cc on one process,
// tests/redis/federated_fair_escrow_fleet_test.cc on three): 3 regions x 6
// tenants whose weights differ within and between regions (29 in all), and
// skewed demand factors (a tenant's demand per window is its factor times
// its share): region 0 holds the heaviest tenants, and every tenant asks for
// more than its share; with `light`, five tenants ask for well under it.

#ifndef THROTTLEKIT_TESTS_SUPPORT_FAIR_FLEET_TENANTS_H_
#define THROTTLEKIT_TESTS_SUPPORT_FAIR_FLEET_TENANTS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace throttlekit::testing {

struct FleetTenant {
  std::string name;
  int region = 0;
  int64_t weight = 1;
  double demand_factor = 1;  // demand per window / share
};

inline constexpr int kFleetRegions = 3;
inline constexpr int kFleetTenantsPerRegion = 6;

inline std::vector<FleetTenant> fair_fleet_tenants(bool light) {
  static constexpr int64_t kWeights[3][6] = {
      {4, 1, 1, 2, 1, 3}, {1, 1, 2, 1, 1, 1}, {2, 2, 1, 1, 3, 1}};
  static constexpr double kFactors[3][6] = {{8, 6, 4, 3, 2.5, 2},
                                            {2, 1.6, 1.4, 1.3, 1.2, 1.15},
                                            {1.5, 1.3, 1.2, 1.15, 1.1, 1.1}};
  static constexpr double kLight[3][6] = {{8, 6, 0.3, 3, 2.5, 2},
                                          {2, 0.5, 1.4, 0.2, 1.2, 1.15},
                                          {0.4, 1.3, 1.2, 0.6, 1.1, 1.1}};
  std::vector<FleetTenant> out;
  for (int r = 0; r < kFleetRegions; ++r) {
    for (int t = 0; t < kFleetTenantsPerRegion; ++t) {
      out.push_back({"r" + std::to_string(r) + "t" + std::to_string(t), r,
                     kWeights[r][t], light ? kLight[r][t] : kFactors[r][t]});
    }
  }
  return out;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_FAIR_FLEET_TENANTS_H_
