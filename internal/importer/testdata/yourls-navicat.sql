/*
 Navicat Premium Data Transfer

 Source Server         : shortener
 Source Server Type    : MySQL
 Source Server Version : 80036
 Source Host           : localhost:3306
 Source Schema         : links

 Target Server Type    : MySQL
 Target Server Version : 80036
 File Encoding         : 65001

 Date: 05/03/2026 10:00:00
*/

SET NAMES utf8mb4;
SET FOREIGN_KEY_CHECKS = 0;

-- ----------------------------
-- Table structure for lnk_url
-- ----------------------------
DROP TABLE IF EXISTS `lnk_url`;
CREATE TABLE `lnk_url`  (
  `keyword` varchar(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  `url` text CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `title` text CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL,
  `timestamp` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  `ip` varchar(41) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL,
  `clicks` int UNSIGNED NOT NULL,
  PRIMARY KEY (`keyword`) USING BTREE,
  INDEX `ip`(`ip` ASC) USING BTREE,
  INDEX `timestamp`(`timestamp` ASC) USING BTREE,
  INDEX `url_idx`(`url`(30) ASC) USING BTREE
) ENGINE = InnoDB CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin ROW_FORMAT = Dynamic;

-- ----------------------------
-- Records of lnk_url
-- ----------------------------
INSERT INTO `lnk_url` VALUES ('promo', 'https://example.com/promo?utm_source=news&utm_medium=mail', 'Spring promo', '2026-03-01 12:00:00', '192.0.2.1', 5);
INSERT INTO `lnk_url` VALUES ('Docs_v2', 'https://example.com/docs/v2', 'It''s the docs', '2026-03-01 12:05:00', '192.0.2.1', 0);
INSERT INTO `lnk_url` VALUES ('bin', X'68747470733a2f2f6578616d706c652e636f6d2f62696e', _utf8mb4'Binary' COLLATE utf8mb4_unicode_ci, '2026-03-01 12:10:00', '192.0.2.1', 1);
INSERT INTO `lnk_url` VALUES ('short', 'https://example.com/short', NULL, '2026-03-01 12:15:00', '192.0.2.1');
INSERT INTO `lnk_url` VALUES ('now', 'https://example.com/now', NULL, NOW(), '192.0.2.1', 0);

-- ----------------------------
-- Table structure for lnk_options
-- ----------------------------
DROP TABLE IF EXISTS `lnk_options`;
CREATE TABLE `lnk_options`  (
  `option_id` bigint UNSIGNED NOT NULL AUTO_INCREMENT,
  `option_name` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL DEFAULT '',
  `option_value` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL,
  PRIMARY KEY (`option_id`, `option_name`) USING BTREE
) ENGINE = InnoDB AUTO_INCREMENT = 3 CHARACTER SET = utf8mb4 COLLATE = utf8mb4_unicode_ci ROW_FORMAT = Dynamic;

-- ----------------------------
-- Records of lnk_options
-- ----------------------------
INSERT INTO `lnk_options` VALUES (1, 'version', '1.9.2');
INSERT INTO `lnk_options` VALUES (2, 'url', 'https://sho.rt');

SET FOREIGN_KEY_CHECKS = 1;
