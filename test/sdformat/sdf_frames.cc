// Where libsdformat places every link and joint of an SDF model, for test/test_sdf_frames.py to compare
// with our reader (uk_controller/files/sdf.py). sdf::Root::Load parses the file (an SDF 1.4-1.6 file is
// converted to the current specification first: <use_parent_model_frame> becomes
// expressed_in="__model__"), then every pose and axis is resolved in the model frame:
//
//   error: <message>
//   link: <name> pose=<x y z qw qx qy qz>                  Link::SemanticPose resolved in __model__
//   joint: <name> type=<t> parent=<l> child=<l> pose=<x y z qw qx qy qz> axis=<x y z> [axis2=<x y z>]
//                                                          Joint::SemanticPose, JointAxis::ResolveXyz
//
// Exit status: 0 without error, 1 no model, 2 errors, 3 usage.
#include <iomanip>
#include <iostream>
#include <string>

#include <sdf/sdf.hh>

#if SDF_MAJOR_VERSION >= 13
namespace gzm = gz::math;
#else
namespace gzm = ignition::math;  // sdformat 12 and older
#endif

namespace {

const char *joint_type(sdf::JointType type) {
  switch (type) {
    case sdf::JointType::BALL: return "ball";
    case sdf::JointType::CONTINUOUS: return "continuous";
    case sdf::JointType::FIXED: return "fixed";
    case sdf::JointType::PRISMATIC: return "prismatic";
    case sdf::JointType::REVOLUTE: return "revolute";
    case sdf::JointType::UNIVERSAL: return "universal";
    default: return "other";
  }
}

void print_pose(const gzm::Pose3d &pose) {
  const auto &p = pose.Pos();
  const auto &q = pose.Rot();
  std::cout << p.X() << ' ' << p.Y() << ' ' << p.Z() << ' ' << q.W() << ' ' << q.X() << ' ' << q.Y() << ' '
            << q.Z();
}

bool print_axis(const char *label, const sdf::JointAxis *axis, sdf::Errors &errors) {
  if (axis == nullptr) return false;
  gzm::Vector3d xyz;
  for (const auto &e : axis->ResolveXyz(xyz, "__model__")) errors.push_back(e);
  std::cout << ' ' << label << '=' << xyz.X() << ' ' << xyz.Y() << ' ' << xyz.Z();
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: sdf_frames FILE.sdf\n";
    return 3;
  }
  std::cout << std::setprecision(17);
  sdf::Root root;
  sdf::Errors errors = root.Load(argv[1], sdf::ParserConfig());
  const sdf::Model *model = root.Model();
  if (model == nullptr) {
    for (const auto &error : errors) std::cout << "error: " << error.Message() << "\n";
    std::cout << "error: no model\n";
    return 1;
  }
  for (uint64_t i = 0; i < model->LinkCount(); ++i) {
    const sdf::Link *link = model->LinkByIndex(i);
    gzm::Pose3d pose;
    for (const auto &e : link->SemanticPose().Resolve(pose, "__model__")) errors.push_back(e);
    std::cout << "link: " << link->Name() << " pose=";
    print_pose(pose);
    std::cout << "\n";
  }
  for (uint64_t i = 0; i < model->JointCount(); ++i) {
    const sdf::Joint *joint = model->JointByIndex(i);
    gzm::Pose3d pose;
    for (const auto &e : joint->SemanticPose().Resolve(pose, "__model__")) errors.push_back(e);
    std::cout << "joint: " << joint->Name() << " type=" << joint_type(joint->Type())
              << " parent=" << joint->ParentLinkName() << " child=" << joint->ChildLinkName() << " pose=";
    print_pose(pose);
    print_axis("axis", joint->Axis(0), errors);
    print_axis("axis2", joint->Axis(1), errors);
    std::cout << "\n";
  }
  for (const auto &error : errors) {
    std::string text = error.Message();
    for (char &c : text) if (c == '\n') c = ' ';
    std::cout << "error: " << text << "\n";
  }
  return errors.empty() ? 0 : 2;
}
